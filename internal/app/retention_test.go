package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

func TestRetentionIsReadFromTheEnvironment(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		ordinary, notable string
		want              ledger.Retention
	}{
		{"", "", ledger.Retention{Ordinary: 30 * day, Notable: 180 * day}},
		{"7d", "", ledger.Retention{Ordinary: 7 * day, Notable: 180 * day}},
		{"720h", "365d", ledger.Retention{Ordinary: 30 * day, Notable: 365 * day}},
		{"2d", "2d", ledger.Retention{Ordinary: 2 * day, Notable: 2 * day}},
	} {
		cfg, err := ConfigFromEnv(env(map[string]string{EnvRetention: c.ordinary, EnvRetentionNotable: c.notable}))
		if err != nil || cfg.Retention != c.want {
			t.Errorf("%q, %q: %+v, %v; want %+v", c.ordinary, c.notable, cfg.Retention, err, c.want)
		}
	}
	for _, bad := range []struct {
		ordinary, notable, names, rule string
	}{
		{"30", "", EnvRetention, "whole days"},
		{"0d", "", EnvRetention, "whole number of days"},
		{"-5d", "", EnvRetention, "whole number of days"},
		{"12h", "", EnvRetention, "must be at least 24h"},
		{"30d", "7d", EnvRetentionNotable, "must be at least " + EnvRetention},
		{"400d", "", EnvRetention, "set " + EnvRetentionNotable + " too"},
		{"", "soon", EnvRetentionNotable, "positive duration"},
	} {
		_, err := ConfigFromEnv(env(map[string]string{EnvRetention: bad.ordinary, EnvRetentionNotable: bad.notable}))
		if err == nil || !strings.Contains(err.Error(), bad.names) || !strings.Contains(err.Error(), bad.rule) {
			t.Errorf("%q, %q: err = %v, want one naming %s and %q", bad.ordinary, bad.notable, err, bad.names, bad.rule)
		}
	}
}
