package pmsweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/breakertest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// reclaimThrough settles rows through another store, counted: the scan goes on working, the
// settling transactions meet the outage.
type reclaimThrough struct {
	pmsweep.Store
	rows  *ledger.TaskStore
	count *breakertest.Rows
}

func (r reclaimThrough) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	r.count.Begin()
	return r.rows.ReclaimTask(ctx, queue, id, reclaimer, pauses, now, decide)
}

// Firestore goes away under a run of 200 stale tasks, from its first row transaction: once five
// row transactions in a row have failed the store's way, the run stops trying rows and fails
// store_unavailable within seconds, not when its four-minute budget is spent; its record has
// failed_at and no completed_at, and no task was reclaimed.
func TestARunWhoseStoreIsDownStopsWithinSecondsAndFailsStoreUnavailable(t *testing.T) {
	t.Parallel()
	const total = 200
	count := &breakertest.Rows{Outage: &fsfaulttest.Outage{}}
	e := newEnv(t, pmsweep.Config{}, nil)
	rows := ledger.NewTaskStore(count.Outage.Client(t, e.FS), ledger.TxConfig{Timeout: time.Second})
	cfg := pmsweep.Config{}.WithDefaults()
	e.wf = pmsweep.New(reclaimThrough{Store: e.tasks, rows: rows, count: count}, cfg, ledgertest.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	e.claimed(total)
	e.Clock.Advance(10 * time.Minute)

	raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "test-sweeper"})
	breakertest.Check(t, breakertest.Run{
		Engine: e.Engine, Records: e.FS, Rows: count, Total: total, Concurrency: cfg.Concurrency, Budget: cfg.Budget,
		Req: workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: true}},
	})
	for i := range total {
		if task := e.task(fmt.Sprintf("task-%03d", i)); task.ReclaimCount != 0 {
			t.Fatalf("task %s was reclaimed through a store that is down", fmt.Sprintf("task-%03d", i))
		}
	}
}
