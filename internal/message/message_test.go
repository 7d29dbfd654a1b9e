package message

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/contract"
)

func violation(t *testing.T, err error) contract.Violation {
	t.Helper()
	var ve *contract.ValidationError
	if !errors.As(err, &ve) || len(ve.Violations) == 0 {
		t.Fatalf("err = %v, want a *contract.ValidationError", err)
	}
	return ve.Violations[0]
}

func TestParseStart(t *testing.T) {
	s, err := ParseStart([]byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": "x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.WorkflowType != contract.ExecutionSyncCloudRun || string(s.InitialData) != `{"organization_uuid": "x"}` {
		t.Errorf("parsed %+v", s)
	}
	if _, err := ParseStart([]byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run"}`)); err != nil {
		t.Errorf("initial_data may be absent: %v", err)
	}
}

func TestParseStartRejections(t *testing.T) {
	tests := []struct{ name, body, field, rule string }{
		{"empty", ``, "body", "required"},
		{"not json", `{"workflow_type":`, "body", "type"},
		{"array", `[]`, "body", "type"},
		{"missing type", `{"initial_data": {}}`, "workflow_type", "required"},
		{"unknown type", `{"workflow_type": "nope"}`, "workflow_type", "enum"},
		{"type not a string", `{"workflow_type": 3}`, "workflow_type", "type"},
		{"unknown field", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "data": {}}`, "data", "additionalProperties"},
		{"field with an empty name", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "": {}}`, "body", "additionalProperties"},
		{"unknown field with a quote", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "a\"b": {}}`, `a"b`, "additionalProperties"},
		{"initial_data an array", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": [1]}`, "initial_data", "type"},
		{"initial_data a string", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": "x"}`, "initial_data", "type"},
		{"two objects", `{"workflow_type": "runner.execution-sync-stale-cloud-run"} {}`, "body", "type"},
		{"oversized", `{"workflow_type": "` + strings.Repeat("x", MaxBodyBytes) + `"}`, "body", "maxLength"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStart([]byte(tt.body))
			v := violation(t, err)
			if v.Field != tt.field || v.Rule != tt.rule {
				t.Errorf("violation = %+v, want %s/%s", v, tt.field, tt.rule)
			}
		})
	}
}

func TestDecodeStartReadsNoMoreThanTheLimit(t *testing.T) {
	r := &countingReader{r: strings.NewReader(`{"workflow_type":"` + strings.Repeat("x", 4*MaxBodyBytes) + `"}`)}
	_, err := DecodeStart(r)
	if v := violation(t, err); v.Rule != "maxLength" {
		t.Errorf("violation = %+v", v)
	}
	if r.n > MaxBodyBytes+1 {
		t.Errorf("read %d bytes of an oversized body, want at most %d", r.n, MaxBodyBytes+1)
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestParsePubSub(t *testing.T) {
	data := base64.StdEncoding.EncodeToString([]byte(`{"workflow_type": "x"}`))
	m, err := ParsePubSub([]byte(`{"message": {"data": "` + data + `", "attributes": {"trigger": "schedule"}, "messageId": "42",
		"publishTime": "2026-11-29T08:00:00Z"}, "subscription": "projects/p/subscriptions/s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != `{"workflow_type": "x"}` || m.Attributes["trigger"] != "schedule" || m.MessageID != "42" || m.PublishTime.IsZero() {
		t.Errorf("parsed %+v", m)
	}
	for _, tt := range []struct{ body, field string }{
		{`{}`, "message"},
		{`not json`, "message"},
		{`{"message": {"data": "***"}}`, "message"},
		{`{"message": {"data": 5}}`, "message.data"},
		{`{"message": {"attributes": [1]}}`, "message.attributes"},
	} {
		_, err := ParsePubSub([]byte(tt.body))
		if v := violation(t, err); v.Field != tt.field {
			t.Errorf("ParsePubSub(%s): field %s, want %s", tt.body, v.Field, tt.field)
		}
	}
}

// A start request may ask for a dry run beside initial_data; a Start (a topic's message) may not.
func TestParseStartRequestTakesDryRunAndStartDoesNot(t *testing.T) {
	body := []byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "dry_run": true, "initial_data": {"organization_uuid": "x"}}`)
	r, err := ParseStartRequest(body)
	if err != nil || !r.DryRun || r.WorkflowType != contract.ExecutionSyncCloudRun || string(r.InitialData) != `{"organization_uuid": "x"}` {
		t.Fatalf("ParseStartRequest = %+v, %v", r, err)
	}
	if r, err := ParseStartRequest([]byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run"}`)); err != nil || r.DryRun {
		t.Errorf("without dry_run: %+v, %v", r, err)
	}
	if v := violation(t, func() error { _, err := ParseStart(body); return err }()); v.Field != "dry_run" || v.Rule != "additionalProperties" {
		t.Errorf("ParseStart of a dry run: violation %+v, want dry_run/additionalProperties", v)
	}
	for body, field := range map[string]string{
		`{"workflow_type": "runner.execution-sync-stale-cloud-run", "dry_run": "yes"}`: "dry_run",
		`{"workflow_type": "nope", "dry_run": true}`:                                   "workflow_type",
	} {
		_, err := ParseStartRequest([]byte(body))
		if v := violation(t, err); v.Field != field {
			t.Errorf("ParseStartRequest(%s): violation %+v, want one naming %s", body, v, field)
		}
	}
}

// A start request that asks to override the storm guard is forbidden, saying where the override
// is made; one that says false is an ordinary request; a Start (a topic's message) knows no such
// field.
func TestParseStartRequestForbidsAStormGuardOverride(t *testing.T) {
	body := []byte(`{"workflow_type": "pm.sweep", "override_storm_guard": true, "initial_data": {"queue": "builds"}}`)
	_, err := ParseStartRequest(body)
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeForbidden || contract.CodeOf(err).HTTPStatus() != 403 ||
		!strings.Contains(ce.Message, "--override-storm-guard") {
		t.Errorf("ParseStartRequest(%s) = %v, want forbidden naming --override-storm-guard", body, err)
	}
	if _, err := ParseStartRequest([]byte(`{"workflow_type": "pm.sweep", "override_storm_guard": false}`)); err != nil {
		t.Errorf("override_storm_guard false: %v, want an ordinary request", err)
	}
	if v := violation(t, func() error { _, err := ParseStart(body); return err }()); v.Field != "override_storm_guard" {
		t.Errorf("ParseStart with override_storm_guard: violation %+v, want one naming it", v)
	}
}
