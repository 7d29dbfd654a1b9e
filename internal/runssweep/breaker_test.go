package runssweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/breakertest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// abandonThrough runs each abandonment's transaction on another store, counted: the scan and
// counts go on working, the rows meet the outage.
type abandonThrough struct {
	runssweep.Store
	rows  *ledger.ExtensionRunStore
	count *breakertest.Rows
}

func (a abandonThrough) Abandon(ctx context.Context, runID string, pauses []string, s ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	a.count.Begin()
	return a.rows.Abandon(ctx, runID, pauses, s, decide)
}

// Firestore goes away after the sweep has abandoned ten of 150 idle background runs: five
// abandonments in a row fail the store's way, the sweep tries no more and fails
// store_unavailable long before its budget; every run is either abandoned with its interlock
// released or left running holding it.
func TestASweepWhoseStoreGoesDownStopsAndFailsStoreUnavailable(t *testing.T) {
	t.Parallel()
	const total = 150
	e := newEnv(t, nil)
	count := &breakertest.Rows{Outage: &fsfaulttest.Outage{}, Healthy: 10}
	rows := ledger.NewExtensionRunStore(count.Outage.Client(t, e.FS), ledger.TxConfig{Timeout: time.Second})
	cfg := runssweep.Config{}.WithDefaults()
	e.wf = runssweep.New(abandonThrough{Store: e.store, rows: rows, count: count}, cfg, ledgertest.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	ids := make(map[string]string, total) // run id → extension
	for i := range total {
		ext := fmt.Sprintf("ext-%03d", i)
		ids[e.start(ext, true, time.Hour)] = ext
	}

	breakertest.Check(t, breakertest.Run{
		Engine: e.Engine, Records: e.FS, Rows: count, Total: total, Concurrency: cfg.Concurrency, Budget: cfg.Budget,
		Req: workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(`{"older_than_ms": 600000, "limit": 1000}`),
			Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: true}},
	})
	abandoned := 0
	for id, ext := range ids {
		r := e.run(id)
		l, held := e.interlock(ext)
		switch {
		case r.Status == ledger.ExtensionRunning && r.Settlement == nil && held && l.RunID == id:
		case r.Status != ledger.ExtensionRunning && r.Outcome == ledger.OutcomeAbandoned && r.Settlement != nil && !held:
			abandoned++
		default:
			t.Errorf("run %s half written: status %s outcome %q settlement %+v, interlock held %v by %s", id, r.Status, r.Outcome, r.Settlement, held, l.RunID)
		}
	}
	if abandoned > count.Healthy {
		t.Errorf("%d runs abandoned, but only %d transactions began before the outage", abandoned, count.Healthy)
	}
}
