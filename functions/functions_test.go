package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/auth/authtest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func post(t *testing.T, path string, header http.Header, body []byte) (int, map[string]any) {
	t.Helper()
	return request(t, http.MethodPost, path, header, body)
}

func request(t *testing.T, method, path string, header http.Header, body []byte) (int, map[string]any) {
	t.Helper()
	code, _, raw := send(t, method, path, header, body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return code, m
}

// send makes one request of the served functions and returns the answer's status, header and body.
func send(t *testing.T, method, path string, header http.Header, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, baseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

func errorOf(body map[string]any) (code, message string, details map[string]any) {
	e, _ := body["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	details, _ = e["details"].(map[string]any)
	return
}

func TestStartWorkflowRunsOneScopeInlineAndReturnsItsOutput(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t, w.org, kindSucceeded)
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	if out["started_count"] != float64(1) || out["organization_uuid"] != w.org || out["limit"] != float64(25) || out["completed_at"] == nil {
		t.Errorf("output = %v", out)
	}
	if r := w.row(t, id); r.Active || r.Outcome != "succeeded" {
		t.Errorf("row = %+v", r)
	}
	recs := w.runRecords(t)
	if len(recs) != 1 || recs[0].Trigger != "manual" || recs[0].Status != "completed" || recs[0].Actor != allowed {
		t.Errorf("run records = %+v", recs)
	}
}

func TestStartWorkflowErrorCodes(t *testing.T) {
	w := newWorld(t)
	valid := []byte(startBody(w.org, ""))
	withToken := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	tests := []struct {
		name   string
		method string
		header http.Header
		body   string
		status int
		code   string
		field  string // a validation failure names it
	}{
		{"no token", "POST", nil, string(valid), 401, "unauthorized", ""},
		{"not a bearer token", "POST", http.Header{"Authorization": {"Basic b3BzOnB3"}}, string(valid), 401, "unauthorized", ""},
		{"garbage token", "POST", withToken("a.b.c"), string(valid), 401, "unauthorized", ""},
		{"wrong audience", "POST", withToken(idToken(t, map[string]any{"aud": "https://elsewhere.example"})), string(valid), 401, "unauthorized", ""},
		{"expired", "POST", withToken(idToken(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix()})), string(valid), 401, "unauthorized", ""},
		{"not Google's issuer", "POST", withToken(idToken(t, map[string]any{"iss": "https://evil.example"})), string(valid), 401, "unauthorized", ""},
		{"signed by another key", "POST", withToken(authtest.Tamper(idToken(t, nil))), string(valid), 401, "unauthorized", ""},
		{"caller not allowed", "POST", withToken(idToken(t, map[string]any{"email": "intruder@example.com"})), string(valid), 403, "forbidden", ""},
		{"email not verified", "POST", withToken(idToken(t, map[string]any{"email_verified": false})), string(valid), 403, "forbidden", ""},
		{"fleet-wide sweep", "POST", bearer(t), `{"workflow_type": "platform.extension.runs.sweep", "initial_data": {"older_than_ms": 1}}`, 403, "forbidden", ""},
		{"limit 0", "POST", bearer(t), startBody(w.org, `, "limit": 0`), 400, "validation_failed", "limit"},
		{"missing organization", "POST", bearer(t), `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {}}`, 400, "validation_failed", "organization_uuid"},
		{"unknown workflow", "POST", bearer(t), `{"workflow_type": "runner.nope"}`, 400, "validation_failed", "workflow_type"},
		{"not JSON", "POST", bearer(t), `{"workflow_type"`, 400, "validation_failed", "body"},
		{"unknown top-level field", "POST", bearer(t), `{"workflow_type": "runner.execution-sync-stale-cloud-run", "input": {}}`, 400, "validation_failed", "input"},
		{"GET", "GET", bearer(t), ``, 405, "method_not_allowed", ""},
		{"oversized", "POST", bearer(t), `{"workflow_type": "` + strings.Repeat("a", 2<<20) + `"}`, 400, "validation_failed", "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := request(t, tt.method, "/StartWorkflow", tt.header, []byte(tt.body))
			code, msg, details := errorOf(body)
			if status != tt.status || code != tt.code {
				t.Fatalf("status %d code %q (%s), want %d %s", status, code, msg, tt.status, tt.code)
			}
			if tt.field != "" {
				vs, _ := details["violations"].([]any)
				first, _ := func() (map[string]any, bool) {
					if len(vs) == 0 {
						return nil, false
					}
					m, ok := vs[0].(map[string]any)
					return m, ok
				}()
				if first["field"] != tt.field {
					t.Errorf("violations %v do not name %s", vs, tt.field)
				}
			}
		})
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("refused requests left %d run records", len(recs))
	}
}

func TestOverlappingManualRunsGetConflict(t *testing.T) {
	w := newWorld(t)
	w.stale(t, w.org, kindSucceeded)
	fake.SetLatency(cloudrunfake.GetExecution, 2*time.Second)
	defer fake.ClearFaults()
	first := make(chan int, 1)
	go func() {
		code, _ := post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
		first <- code
	}()
	guard := runstore.GuardKey(string(contract.ExecutionSyncCloudRun), w.org)
	eventually(t, 10*time.Second, "the first run to take its guard", func() bool {
		_, err := w.fs.Collection(ledger.GuardsCollection).Doc(guard).Get(context.Background())
		return err == nil
	})
	code, body := post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
	ecode, _, details := errorOf(body)
	if code != http.StatusConflict || ecode != "conflict" || details["workflow_run_uuid"] == nil {
		t.Errorf("second run: %d %v", code, body)
	}
	if c := <-first; c != http.StatusOK {
		t.Errorf("first run: %d", c)
	}
	if n := len(w.runRecords(t)); n != 1 {
		t.Errorf("%d run records, want 1", n)
	}
}

func TestStartWorkflowAnswers500WhenTheRunFails(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t, w.org, kindSucceeded)
	fake.FailRate(cloudrunfake.GetExecution, codes.PermissionDenied, 1)
	defer fake.ClearFaults()
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
	ecode, _, details := errorOf(out)
	output, _ := details["output"].(map[string]any)
	if code != http.StatusInternalServerError || ecode != "internal" || details["workflow_run_uuid"] == nil || output["failure_reason"] != "executor_permission_denied" {
		t.Errorf("status %d body %v", code, out)
	}
	if !w.row(t, id).Active {
		t.Error("a row was settled by a run whose executor refused access")
	}
}
