package pmsweep_test

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
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// pauser is the real store, but it has an operator pause the sweep right after the run's first
// reclaim commits, and counts the reclaims tried.
type pauser struct {
	pmsweep.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	r, err := p.Store.ReclaimTask(ctx, queue, id, reclaimer, pauses, now, decide)
	p.Tried()
	return r, err
}

// A pause of the queue (or fleet-wide) taken while a sweep is reclaiming stops the tasks it has
// not reclaimed yet: the next transaction reads the pause with its task and writes nothing, the
// sweep tries no further task, and its stats count them paused. A run told to override the pause
// goes on, and another queue's pause stops nothing.
func TestAPauseTakenMidSweepStopsTheTasksNotYetReclaimed(t *testing.T) {
	type pause struct {
		scope    func(queue string) string
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "its queue is paused", Paused: true, Case: pause{func(q string) string { return q }, false}},
		{Name: "it is paused fleet-wide", Paused: true, Case: pause{func(string) string { return "" }, false}},
		{Name: "its queue is paused; the run overrides it", Paused: false, Case: pause{func(q string) string { return q }, true}},
		{Name: "another queue is paused", Paused: false, Case: pause{func(q string) string { return q + "-other" }, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		// One task at a time, so that the pause falls between two reclaims.
		e := newEnv(t, pmsweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, func(s pmsweep.Store) pmsweep.Store { p = &pauser{Store: s}; return p })
		p.Pause = sweeptest.PauseWith(t, e.FS, func() ledger.Pause {
			return ledger.Pause{WorkflowType: string(contract.PMSweep),
				Scope: c.scope(e.queue), PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "queue migration"}
		})
		leases := e.claimed(3)
		heartbeats := map[string]int{}
		for _, l := range leases {
			heartbeats[l.TaskID] = len(e.chain(l.TaskID, ledger.ChainHeartbeats))
		}
		e.Clock.Advance(time.Hour)

		raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "sweeper"})
		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw,
			Trigger: workflow.TriggerLocal, OverridePause: c.override}, "sweep")
		o, s := testenv.DecodeRun[pmsweep.Output, pmsweep.Stats](t, out.Output, out.Stats)
		requeued := 0
		for _, l := range leases {
			if tk := e.task(l.TaskID); tk.Status == ledger.TaskNew {
				requeued++
			} else if n := len(e.chain(l.TaskID, ledger.ChainHeartbeats)); n != heartbeats[l.TaskID] {
				t.Errorf("task %s was left working, but its heartbeat chain has %d entries, not %d", l.TaskID, n, heartbeats[l.TaskID])
			}
		}
		if len(o.Raced) != 0 {
			t.Errorf("output %+v: a task listed raced, but none moved", o)
		}
		return sweeptest.Swept{Settled: requeued, Listed: len(o.Reclaimed), Paused: s.Paused, Calls: p.Calls(), Said: fmt.Sprintf("output %+v, stats %+v", o, s)}
	})
}

// A dry run reads the pause as the reclaims would: its preview keeps the paused queue's tasks
// "paused", and, told to override the pause, says what the sweep would reclaim. Either way it
// writes nothing.
func TestADryRunOfAPausedQueuePreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "reclaim", "keep/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, pmsweep.Config{}, nil)
		sweeptest.Pause(t, e.FS, ledger.Pause{WorkflowType: string(contract.PMSweep),
			Scope: e.queue, PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "queue migration"})
		leases := e.claimed(2)
		e.Clock.Advance(time.Hour)
		e.Spy.Reset()
		raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "sweeper"})
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw,
			Trigger: workflow.TriggerLocal, DryRun: true, OverridePause: override},
			func(s pmsweep.Stats) *explain.Preview { return s.Preview })
		for _, l := range leases {
			if tk := e.task(l.TaskID); tk.Status != ledger.TaskWorking {
				t.Errorf("the dry run wrote task %s: %+v", l.TaskID, tk)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Paused, Spy: e.Spy}
	})
}
