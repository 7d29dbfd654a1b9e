package pmsweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// reclaimThrough settles rows through another store: the scan goes on working, the settling
// transactions meet the outage.
type reclaimThrough struct {
	pmsweep.Store
	rows *ledger.TaskStore
}

func (r reclaimThrough) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	return r.rows.ReclaimTask(ctx, queue, id, reclaimer, pauses, now, decide)
}

// Firestore goes away under a run of 200 stale tasks: once five row transactions in a row have
// failed the store's way, the run stops trying rows and fails store_unavailable within seconds,
// not when its four-minute budget is spent; its record has failed_at and no completed_at.
func TestARunWhoseStoreIsDownStopsWithinSecondsAndFailsStoreUnavailable(t *testing.T) {
	t.Parallel()
	var outage fsfaulttest.Outage
	e := newEnv(t, pmsweep.Config{}, nil)
	rows := ledger.NewTaskStore(outage.Client(t, e.fs), ledger.TxConfig{Timeout: time.Second, ServerTime: e.clock.Now})
	e.wf = pmsweep.New(reclaimThrough{Store: e.tasks, rows: rows}, pmsweep.Config{}, ledger.LocalClock(e.clock.Now))
	e.engine = workflow.NewEngine(workflow.Options{Runs: ledger.NewRunStore(e.fs), Now: e.clock.Now, Log: logging.Discard()}, e.wf.Definition())
	e.claimed(200)
	e.clock.Advance(10 * time.Minute)
	outage.Down()

	raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "test-sweeper"})
	began := time.Now()
	out, err := e.engine.Start(context.Background(), workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal, StormOverride: true})
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	var se *workflow.StepError
	if out.Status != workflow.StateFailed || !errors.As(out.Err, &se) || se.Reason != "store_unavailable" {
		t.Fatalf("outcome %s %v, want failed store_unavailable", out.Status, out.Err)
	}
	if took > 10*time.Second {
		t.Errorf("the run took %s to stop", took)
	}
	t.Logf("stopped after %s", took)
	rec, err := ledger.NewRunStore(e.fs).GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed || rec.Failure == nil || rec.Failure.Reason != "store_unavailable" || !rec.CompletedAt.IsZero() {
		t.Errorf("record %s %+v completed_at %s", rec.Status, rec.Failure, rec.CompletedAt)
	}
	for i := range 200 {
		if task := e.task(fmt.Sprintf("task-%03d", i)); task.ReclaimCount != 0 {
			t.Fatalf("task %s was reclaimed through a store that is down", fmt.Sprintf("task-%03d", i))
		}
	}
}
