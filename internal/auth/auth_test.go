package auth

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestConfigurationsThatCannotBeEnforcedAreRefused(t *testing.T) {
	for name, c := range map[string]Config{
		"off on Cloud Run":     {Mode: ModeOff, OnCloudRun: true},
		"no audience":          {Mode: ModeGoogle},
		"default, no audience": {},
		"unknown mode":         {Mode: "basic", Audience: "x"},
	} {
		if _, err := New(context.Background(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOffAcceptsEveryCallerLocally(t *testing.T) {
	v, err := New(context.Background(), Config{Mode: ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	who, err := v.Caller(httptest.NewRequest("POST", "/", nil))
	if err != nil || !v.Disabled() || !strings.Contains(who, "auth off") {
		t.Errorf("caller %q err %v", who, err)
	}
}
