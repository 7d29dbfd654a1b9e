package leasesettle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// pauser is the real store, but it has an operator pause the workflow right after the run's
// first abandonment commits, and counts the abandonments tried.
type pauser struct {
	leasesettle.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) AbandonLease(ctx context.Context, id string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	abandoned, refused, err := p.Store.AbandonLease(ctx, id, reads, decide)
	p.Tried()
	return abandoned, refused, err
}

// A pause of the runner group, of its organization or fleet-wide, taken while a run is
// abandoning leases, stops the leases it has not abandoned yet: the next transaction reads the
// pause with its lease and writes nothing, the run tries no further lease, and its stats count
// them refused "paused". A run told to override the pause goes on, and another group's pause
// stops nothing.
func TestAPauseTakenMidRunStopsTheLeasesNotYetAbandoned(t *testing.T) {
	type pause struct {
		scope    func(e *env) string
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "its group is paused", Paused: true, Case: pause{func(e *env) string { return e.org + "/" + e.group }, false}},
		{Name: "its organization is paused", Paused: true, Case: pause{func(e *env) string { return e.org }, false}},
		{Name: "it is paused fleet-wide", Paused: true, Case: pause{func(*env) string { return "" }, false}},
		{Name: "its group is paused; the run overrides it", Paused: false, Case: pause{func(e *env) string { return e.org + "/" + e.group }, true}},
		{Name: "another group of its organization is paused", Paused: false, Case: pause{func(e *env) string { return e.org + "/" + e.group + "-other" }, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		// One lease at a time, so that the pause falls between two abandonments.
		e := newEnv(t, leasesettle.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, func(s leasesettle.Store) leasesettle.Store { p = &pauser{Store: s}; return p })
		p.Pause = sweeptest.PauseWith(t, e.FS, func() ledger.Pause {
			return ledger.Pause{WorkflowType: string(contract.WorkspaceLeaseSettle),
				Scope: c.scope(e), PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "INC-42"}
		})
		ids := []string{e.lease(e.instance("terminated"), time.Minute), e.lease(e.instance("stopped"), time.Minute), e.lease(e.instance("failed"), time.Minute)}

		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw,
			Trigger: workflow.TriggerLocal, OverridePause: c.override}, "run")
		o, s := testenv.DecodeRun[leasesettle.Output, leasesettle.Stats](t, out.Output, out.Stats)
		abandoned := 0
		for _, id := range ids {
			switch l := e.get(id); {
			case l.Status == ledger.LeaseAbandoned:
				abandoned++
			case l.Status != ledger.LeaseActive || l.Settlement != nil:
				t.Errorf("lease %s left, but written: %+v", id, l)
			}
		}
		if s.Raced != 0 {
			t.Errorf("stats %+v: a lease counted raced, but none moved", s)
		}
		return sweeptest.Swept{Settled: abandoned, Listed: o.Settled, Paused: s.Refused[leasesettle.RefusePaused], Calls: p.Calls(), Said: fmt.Sprintf("stats %+v", s)}
	})
}

// A dry run reads the pause as the abandonments would: its preview refuses the paused group's
// leases "paused", and, told to override the pause, says what the run would abandon. Either way
// it writes nothing.
func TestADryRunOfAPausedGroupPreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "abandon", "refuse/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, leasesettle.Config{}, nil)
		sweeptest.Pause(t, e.FS, ledger.Pause{WorkflowType: string(contract.WorkspaceLeaseSettle),
			Scope: e.org, PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "INC-42"})
		ids := []string{e.lease(e.instance("terminated"), time.Minute), e.lease(e.instance("stopped"), time.Minute)}
		e.Spy.Reset()
		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw,
			Trigger: workflow.TriggerLocal, DryRun: true, OverridePause: override},
			func(s leasesettle.Stats) *explain.Preview { return s.Preview })
		for _, id := range ids {
			if l := e.get(id); l.Status != ledger.LeaseActive {
				t.Errorf("the dry run wrote lease %s: %+v", id, l)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Refused[leasesettle.RefusePaused], Spy: e.Spy}
	})
}
