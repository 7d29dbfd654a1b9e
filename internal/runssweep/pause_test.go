package runssweep_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
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
	t.Parallel()
	for _, c := range []struct {
		name     string
		until    time.Duration // the pause's end after now; 0: none
		override bool
		paused   bool
	}{
		{"paused", 0, false, true},
		{"paused; the run overrides it", 0, true, false},
		{"paused until a time already past", -time.Minute, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var p *pauser
			e := newEnv(t, func(s runssweep.Store) runssweep.Store { p = &pauser{Store: s}; return p })
			// One run at a time, so that the pause falls between two abandonments.
			e.wf = runssweep.New(p, runssweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, ledgertest.LocalClock(e.Clock.Now))
			e.Run(e.wf.Definition())
			p.Pause = sweeptest.PauseWith(t, e.FS, func() ledger.Pause {
				pause := ledger.Pause{WorkflowType: string(contract.ExtensionRunsSweep), PausedBy: "op", PausedAt: e.Clock.Now().Add(-2 * time.Minute), Reason: "incident"}
				if c.until != 0 {
					pause.Until = e.Clock.Now().Add(c.until)
				}
				return pause
			})
			ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour), e.start("c", false, time.Hour)}

			out, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.ExtensionRunsSweep,
				InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, OverridePause: c.override})
			if err != nil || out.Status != workflow.StateCompleted {
				t.Fatalf("sweep: %v %v", out.Err, err)
			}
			o, s := testenv.DecodeRun[runssweep.Output, runssweep.Stats](t, out.Output, out.Stats)
			abandoned := 0
			for _, id := range ids {
				if e.run(id).Status == ledger.ExtensionFailed {
					abandoned++
				}
			}
			switch {
			case c.paused && (abandoned != 1 || o.Swept != 1 || s.Paused != 2 || s.Moved != 0 || p.Calls() != 2):
				t.Errorf("abandoned %d, swept %d, stats %+v, %d transactions; want 1 abandoned before the pause, 2 paused, and no transaction after the first paused one",
					abandoned, o.Swept, s, p.Calls())
			case !c.paused && (abandoned != 3 || o.Swept != 3 || s.Paused != 0):
				t.Errorf("abandoned %d, swept %d, stats %+v; want all 3", abandoned, o.Swept, s)
			}
		})
	}
}

// A dry run reads the pause as the abandonments would, so its preview says the sweep would
// abandon nothing while paused; told to override the pause, it says what the sweep would do.
// Either way it writes nothing.
func TestADryRunOfAPausedSweepPreviewsThePause(t *testing.T) {
	t.Parallel()
	sweeptest.EachOverride(t, func(t *testing.T, override bool) {
		e := newEnv(t, nil)
		sweeptest.Pause(t, e.FS, ledger.Pause{WorkflowType: string(contract.ExtensionRunsSweep),
			PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "incident"})
		ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour)}
		e.Spy.Reset()
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep,
			InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, DryRun: true, OverridePause: override},
			func(s runssweep.Stats) *explain.Preview { return s.Preview })
		switch {
		case !override && (p.Rules["keep/paused"] != 2 || p.Counts["abandon"] != 0 || s.Paused != 2):
			t.Errorf("preview %+v, paused %d; want both runs kept, paused", p, s.Paused)
		case override && (p.Counts["abandon"] != 2 || s.Paused != 0):
			t.Errorf("preview %+v, paused %d; want both runs abandoned", p, s.Paused)
		}
		for _, id := range ids {
			if r := e.run(id); r.Status != ledger.ExtensionRunning {
				t.Errorf("the dry run wrote run %s: %+v", id, r)
			}
		}
		sweeptest.NoWrites(t, e.Spy, "the dry run")
	})
}
