package executionsync_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// A run whose executor refuses every connection learned nothing about any row: it ends failed,
// executor_unreachable, with the seed's counts in its output and the rows untouched but for
// the error each one records.
func TestARunThatReachedTheExecutorForNoRowFailsAsUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	rows := e.staleRows(3, succeeded)
	e.fake.Close() // the Cloud Run fake is gone: every connection is refused

	out := e.start(map[string]any{"limit": 10})
	if out.Status != workflow.StateFailed {
		t.Fatalf("run %s, want failed", out.Status)
	}
	if out.Output["failure_reason"] != executionsync.ReasonExecutorUnreachable || out.Output["failed_layer"] != "executor" || out.Output["failed_at"] == nil || out.Output["completed_at"] != nil {
		t.Errorf("output = %v, want failure_reason %s, failed_layer executor, failed_at and no completed_at", out.Output, executionsync.ReasonExecutorUnreachable)
	}
	o, s := outputOf(t, out)
	if o.CandidateCount != 3 || o.FailedStartCount != 3 || s.Errored != 3 || s.Errors[0].Code != codes.Unavailable.String() {
		t.Errorf("output %+v stats %s errors %+v, want 3 candidates failed to start, errored Unavailable", o, s, s.Errors)
	}
	for _, id := range rows {
		if r := e.get(id); !r.Active || r.Sync.LastError == "" {
			t.Errorf("row %s: active=%t last_error=%q, want active with the error recorded", id, r.Active, r.Sync.LastError)
		}
	}
	rec, err := e.runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed {
		t.Errorf("record status %s, want failed", rec.Status)
	}
}
