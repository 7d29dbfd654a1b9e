package sweeptest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stalesweep/stalesweep/internal/agesweep"
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

// Tallied fails t unless got, what a run decided in the form a tally table states it, is want,
// compared as printed. settled, when not nil, names the list of settled ids in a tally, which a
// want may give as just "?": any one id, since the pool's random order chose which went first.
func Tallied[T any](t *testing.T, got, want T, settled func(*T) *[]string) {
	t.Helper()
	if settled != nil {
		if w, g := settled(&want), settled(&got); slices.Equal(*w, []string{"?"}) && len(*g) == 1 {
			*w = *g
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// StepsOf reads Steps from a run's stats of them and its error; a run that failed without a
// workflow.StepError fails t.
func StepsOf(t *testing.T, steps agesweep.Steps, err error) Steps {
	t.Helper()
	var s Steps
	if steps.Malformed != nil {
		s.Malformed = steps.Malformed.Count
	}
	if steps.Invisible != nil {
		s.Invisible = int(steps.Invisible.Count)
	}
	if v := steps.StormGuard; v != nil {
		s.Aged, s.Live, s.Tripped, s.Overridden = v.Aged, v.Live, v.Tripped, v.Overridden
	}
	var se *workflow.StepError
	if errors.As(err, &se) {
		s.Failed = se.Reason
	} else if err != nil {
		t.Fatalf("run failed without a step error: %v", err)
	}
	return s
}
