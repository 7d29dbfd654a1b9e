package runssweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// pauser is the real store, but it has an operator pause the sweep right after the run's first
// abandonment commits, and counts the abandonments tried.
type pauser struct {
	runssweep.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) Abandon(ctx context.Context, runID string, pauses []string, s ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	a, err := p.Store.Abandon(ctx, runID, pauses, s, decide)
	p.Tried()
	return a, err
}

// A pause taken while a sweep is abandoning runs stops the runs it has not abandoned yet: the
// next transaction reads the fleet-wide pause with its run and writes nothing, the sweep tries no
// further run, and its stats count them paused. A run told to override the pause goes on; a
// pause that has ended refuses nothing.
func TestAPauseTakenMidSweepStopsTheRunsNotYetAbandoned(t *testing.T) {
	type pause struct {
		until    time.Duration // the pause's end after now; 0: none
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "paused", Paused: true, Case: pause{0, false}},
		{Name: "paused; the run overrides it", Paused: false, Case: pause{0, true}},
		{Name: "paused until a time already past", Paused: false, Case: pause{-time.Minute, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		e := newEnv(t, func(s runssweep.Store) runssweep.Store { p = &pauser{Store: s}; return p })
		// One run at a time, so that the pause falls between two abandonments.
		e.wf = runssweep.New(p, runssweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, ledger.LocalClock(e.Clock.Now))
		e.Run(e.wf.Definition())
		p.Pause = sweeptest.PauseWith(t, e.FS, func() ledger.Pause {
			pause := ledger.Pause{WorkflowType: string(contract.ExtensionRunsSweep), PausedBy: "op", PausedAt: e.Clock.Now().Add(-2 * time.Minute), Reason: "incident"}
			if c.until != 0 {
				pause.Until = e.Clock.Now().Add(c.until)
			}
			return pause
		})
		ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour), e.start("c", false, time.Hour)}

		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep,
			InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, OverridePause: c.override}, "sweep")
		o, s := testenv.DecodeRun[runssweep.Output, runssweep.Stats](t, out.Output, out.Stats)
		abandoned := 0
		for _, id := range ids {
			if e.run(id).Status == ledger.ExtensionFailed {
				abandoned++
			}
		}
		if s.Moved != 0 {
			t.Errorf("stats %+v: a run counted moved, but none moved", s)
		}
		return sweeptest.Swept{Settled: abandoned, Listed: o.Swept, Paused: s.Paused, Calls: p.Calls(), Said: fmt.Sprintf("stats %+v", s)}
	})
}

// A dry run reads the pause as the abandonments would, so its preview says the sweep would
// abandon nothing while paused; told to override the pause, it says what the sweep would do.
// Either way it writes nothing.
func TestADryRunOfAPausedSweepPreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "abandon", "keep/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, nil)
		sweeptest.Pause(t, e.FS, ledger.Pause{WorkflowType: string(contract.ExtensionRunsSweep),
			PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "incident"})
		ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour)}
		e.Spy.Reset()
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep,
			InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, DryRun: true, OverridePause: override},
			func(s runssweep.Stats) *explain.Preview { return s.Preview })
		for _, id := range ids {
			if r := e.run(id); r.Status != ledger.ExtensionRunning {
				t.Errorf("the dry run wrote run %s: %+v", id, r)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Paused, Spy: e.Spy}
	})
}
