package sweeptest

import (
	"errors"
	"testing"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Steps is what a run reports of the steps every age sweep shares, as a tally test compares
// them: the malformed rows it read past, the invisible rows it counted, the storm guard's
// verdict, and the reason its run failed.
type Steps struct {
	Malformed, Invisible int
	Aged, Live           int64
	Tripped, Overridden  bool
	Failed               string // the run's step error's reason, "" when it did not fail
}

// StepsOf reads Steps from a run's stats and its error; a run that failed without a
// workflow.StepError fails t.
func StepsOf(t *testing.T, malformed *workflow.Malformed, invisible *ledger.Invisible, verdict *storm.Verdict, err error) Steps {
	t.Helper()
	var s Steps
	if malformed != nil {
		s.Malformed = malformed.Count
	}
	if invisible != nil {
		s.Invisible = int(invisible.Count)
	}
	if verdict != nil {
		s.Aged, s.Live, s.Tripped, s.Overridden = verdict.Aged, verdict.Live, verdict.Tripped, verdict.Overridden
	}
	var se *workflow.StepError
	if errors.As(err, &se) {
		s.Failed = se.Reason
	} else if err != nil {
		t.Fatalf("run failed without a step error: %v", err)
	}
	return s
}
