package pmsweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// A sweep that would reclaim more than half of a queue's working tasks reclaims none and fails
// with storm_guard; a dry run says it would be refused; an operator overrides it from the command.
func TestTheStormGuardStopsMassReclaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	leases := e.claimed(20)
	e.Clock.Advance(10 * time.Minute)
	for _, l := range leases[:8] { // 8 workers alive, 12 silent: more than half, more than 10
		if _, err := e.worker.Heartbeat(ctx, l, e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	start := func(dryRun, override bool) (workflow.Outcome, pmsweep.Output, pmsweep.Stats) {
		raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "janitor", DryRun: dryRun})
		out, err := e.Engine.Start(ctx, workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: override}})
		if err != nil {
			t.Fatal(err)
		}
		o, s := testenv.DecodeRun[pmsweep.Output, pmsweep.Stats](t, out.Output, out.Stats)
		return out, o, s
	}
	e.Spy.Reset()
	out, o, s := start(false, false)
	if out.Status != workflow.StateFailed || !errors.Is(out.Err, storm.ErrTripped) || len(o.Reclaimed) != 0 {
		t.Fatalf("sweep: %s %v, output %+v; want failed by the storm guard, nothing reclaimed", out.Status, out.Err, o)
	}
	if v := s.StormGuard; v == nil || !v.Tripped || v.Aged != 12 || v.Live != 20 || v.Allowed != 10 {
		t.Errorf("verdict %+v, want 12 silent of 20 working, 10 allowed", v)
	}
	for _, w := range e.Spy.Writes() {
		if !strings.Contains(w.Document, "/"+ledger.RunsCollection+"/") && !strings.Contains(w.Document, "/"+ledger.GuardsCollection+"/") {
			t.Errorf("a stopped sweep wrote %s", w.Document)
		}
	}
	out, o, _ = start(true, false)
	if out.Status != workflow.StateCompleted || len(o.Reclaimed) != 12 || len(o.Warnings) == 0 || !strings.Contains(o.Warnings[len(o.Warnings)-1], "storm guard") {
		t.Errorf("dry run: %s, output %+v; want the 12 it would reclaim and a warning that the guard would refuse", out.Status, o)
	}
	out, o, s = start(false, true)
	if out.Status != workflow.StateCompleted || len(o.Reclaimed) != 12 || s.StormGuard == nil || !s.StormGuard.Overridden {
		t.Errorf("override: %s, output %+v, verdict %+v", out.Status, o, s.StormGuard)
	}
	for _, l := range leases[:8] {
		if task := e.task(l.TaskID); task.Status != ledger.TaskWorking || task.ReclaimCount != 0 {
			t.Errorf("live task %s = %+v", l.TaskID, task)
		}
	}
}
