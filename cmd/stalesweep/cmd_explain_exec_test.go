package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// explain runner_executions/ID: text by default, JSON with -o json, exit 4 for a missing row, 2
// for an unknown collection; it settles nothing.
func TestExplainARunnerExecution(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	id := "row-" + uuid.NewString()[:8]
	staleRow(t, fs, fake, org, id, func(name string, at time.Time) *runpb.Execution {
		return cloudrunfake.Failed(name, at, runpb.Condition_NON_ZERO_EXIT_CODE)
	})

	code, stdout, stderr := invoke(t, "explain", "runner_executions/"+id)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"runner_executions/" + id, "A scan sees it now", "ok   organization_enabled", "Executor (cloud_run:projects/p/locations/l): failed",
		"Verdict: settle as failed  (rule: executor_terminal)", "The row as stored:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("text lacks %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = invoke(t, "explain", "runner_executions/"+id, "-o", "json")
	var e struct {
		WorkflowType string         `json:"workflow_type"`
		Visible      bool           `json:"visible"`
		Verdict      string         `json:"verdict"`
		Outcome      string         `json:"outcome"`
		Rule         string         `json:"rule"`
		Executor     map[string]any `json:"executor"`
		Row          map[string]any `json:"row"`
	}
	if err := json.Unmarshal([]byte(stdout), &e); err != nil || code != exitOK {
		t.Fatalf("exit %d, stdout not JSON (%v): %s %s", code, err, stdout, stderr)
	}
	if e.WorkflowType != "runner.execution-sync-stale-cloud-run" || !e.Visible || e.Verdict != "settle" || e.Outcome != "failed" ||
		e.Rule != "executor_terminal" || e.Executor["verdict"] != "failed" || e.Row["organization_uuid"] != org {
		t.Errorf("json = %+v", e)
	}

	calls := fake.Calls(cloudrunfake.GetExecution)
	code, stdout, stderr = invoke(t, "explain", "runner_executions/"+id, "--no-executor")
	if code != exitOK || !strings.Contains(stdout, "Executor: not asked") || !strings.Contains(stdout, "Verdict: unknown  (rule: executor_not_asked)") ||
		fake.Calls(cloudrunfake.GetExecution) != calls {
		t.Errorf("--no-executor: exit %d, %d calls, stdout:\n%s%s", code, fake.Calls(cloudrunfake.GetExecution)-calls, stdout, stderr)
	}

	snap, err := fs.Collection("runner_executions").Doc(id).Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := snap.DataAt("active"); v != true {
		t.Errorf("explain settled the row: %v", snap.Data())
	}

	if code, _, stderr := invoke(t, "explain", "runner_executions/nope-"+uuid.NewString()); code != exitNotFound || !strings.Contains(stderr, "no such document") {
		t.Errorf("a missing row: exit %d, stderr %q; want %d", code, stderr, exitNotFound)
	}
	if code, _, stderr := invoke(t, "explain", "nope/"+id); code != exitInvalid || !strings.Contains(stderr, "runner_executions") {
		t.Errorf("an unknown collection: exit %d, stderr %q; want %d naming runner_executions", code, stderr, exitInvalid)
	}
}
