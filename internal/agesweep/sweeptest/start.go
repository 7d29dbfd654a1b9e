package sweeptest

import (
	"context"
	"testing"

	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
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

// DryPreview is Dry with the run's stats decoded into S, and the preview they hold (preview
// reads it from them); a run whose stats hold none fails the test.
func DryPreview[S any](t testing.TB, engine *workflow.Engine, req workflow.Request, preview func(S) *explain.Preview) (S, *explain.Preview) {
	t.Helper()
	out := Dry(t, engine, req)
	var s S
	testenv.Decode(t, out.Stats, &s)
	p := preview(s)
	if p == nil {
		t.Fatalf("no preview: %+v", out.Stats)
	}
	return s, p
}

// NoWrites fails the test if spy saw a write since it was last reset; what names the writer
// ("the dry run").
func NoWrites(t testing.TB, spy *fsspy.Spy, what string) {
	t.Helper()
	if w := spy.Writes(); len(w) != 0 {
		t.Errorf("%s wrote %+v", what, w)
	}
}
