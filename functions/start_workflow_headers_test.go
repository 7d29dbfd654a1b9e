package functions

import (
	"encoding/json"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
)

// postForHeaders posts to StartWorkflow and returns the status, the headers and the body's
// top-level keys.
func postForHeaders(t *testing.T, body string) (int, http.Header, map[string]any) {
	t.Helper()
	code, header, raw := send(t, http.MethodPost, "/StartWorkflow", bearer(t), []byte(body))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	return code, header, m
}

func TestStartWorkflowNamesTheRunInHeadersAndLeavesTheBodyTheSeeds(t *testing.T) {
	w := newWorld(t)
	w.stale(t, w.org, kindSucceeded)
	code, h, body := postForHeaders(t, startBody(w.org, ""))
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, body)
	}
	recs := w.runRecords(t)
	if len(recs) != 1 {
		t.Fatalf("%d run records, want 1", len(recs))
	}
	if got := h.Get(HeaderWorkflowRunUUID); got != recs[0].WorkflowRunUUID {
		t.Errorf("%s = %q, want the run's uuid %q", HeaderWorkflowRunUUID, got, recs[0].WorkflowRunUUID)
	}
	if got := h.Get(HeaderWorkflowRunStatus); got != recs[0].Status || got != "completed" {
		t.Errorf("%s = %q, record status %q", HeaderWorkflowRunStatus, got, recs[0].Status)
	}
	for k := range body {
		if _, ok := recs[0].Output[k]; !ok {
			t.Errorf("the body has %q, which the run's output (the seed's) does not", k)
		}
	}
	if len(body) != len(recs[0].Output) {
		t.Errorf("body has %d properties, the run's output %d", len(body), len(recs[0].Output))
	}
}

func TestStartWorkflowNamesAFailedRunInHeaders(t *testing.T) {
	w := newWorld(t)
	w.stale(t, w.org, kindSucceeded)
	fake.FailRate(cloudrunfake.GetExecution, codes.PermissionDenied, 1)
	defer fake.ClearFaults()
	code, h, _ := postForHeaders(t, startBody(w.org, ""))
	recs := w.runRecords(t)
	if code != http.StatusInternalServerError || len(recs) != 1 {
		t.Fatalf("status %d, %d run records", code, len(recs))
	}
	if h.Get(HeaderWorkflowRunUUID) != recs[0].WorkflowRunUUID || h.Get(HeaderWorkflowRunStatus) != "failed" {
		t.Errorf("headers %v, record %s %s", h, recs[0].WorkflowRunUUID, recs[0].Status)
	}
}

func TestStartWorkflowNamesNoRunForADryRunOrARefusal(t *testing.T) {
	w := newWorld(t)
	w.stale(t, w.org, kindSucceeded)
	for name, body := range map[string]string{
		"dry run": `{"workflow_type": "runner.execution-sync-stale-cloud-run", "dry_run": true, "initial_data": {"organization_uuid": "` + w.org + `"}}`,
		"refused": startBody(w.org, `, "limit": 0`),
	} {
		_, h, _ := postForHeaders(t, body)
		if h.Get(HeaderWorkflowRunUUID) != "" || h.Get(HeaderWorkflowRunStatus) != "" {
			t.Errorf("%s: headers name a run that has no record: %v", name, h)
		}
	}
}
