package sweeptest

import (
	"context"
	"testing"

	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Completed starts req on engine and fails the test unless the run completed; what names the run
// in the failure ("sweep", "run").
func Completed(t testing.TB, engine *workflow.Engine, req workflow.Request, what string) workflow.Outcome {
	t.Helper()
	out, err := engine.Start(context.Background(), req)
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("%s: %v %v", what, out.Err, err)
	}
	return out
}

// Dry starts req, a dry run, on engine and fails the test unless it ran dry.
func Dry(t testing.TB, engine *workflow.Engine, req workflow.Request) workflow.Outcome {
	t.Helper()
	out, err := engine.Start(context.Background(), req)
	if err != nil || !out.DryRun {
		t.Fatalf("dry run: %+v %v", out, err)
	}
	return out
}
