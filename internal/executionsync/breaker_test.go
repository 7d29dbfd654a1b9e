package executionsync_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/breakertest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// applyThrough runs each sync's transaction on another store, counted: the scan goes on
// working, and each row's Cloud Run call answers, but the row's transaction meets the outage.
type applyThrough struct {
	executionsync.Store
	rows  *ledger.ExecutionStore
	count *breakertest.Rows
}

func (a applyThrough) Apply(ctx context.Context, uuid string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, error) {
	a.count.Begin()
	return a.rows.Apply(ctx, uuid, reads, decide)
}

func (a applyThrough) ApplyOnce(ctx context.Context, runUUID, uuid string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, bool, error) {
	a.count.Begin()
	return a.rows.ApplyOnce(ctx, runUUID, uuid, reads, decide)
}

// Firestore goes away after the run has synced ten of 150 stale rows whose Cloud Run executions
// succeeded: five syncs in a row fail the store's way, the run starts no more syncs and fails
// store_unavailable long before its budget; every row is either settled succeeded or left
// active and untouched.
func TestARunWhoseStoreGoesDownStopsAndFailsStoreUnavailable(t *testing.T) {
	t.Parallel()
	const total = 150
	e := newEnv(t, options{})
	count := &breakertest.Rows{Outage: &fsfaulttest.Outage{}, Healthy: 10}
	rows := ledger.NewExecutionStore(count.Outage.Client(t, e.fs), ledger.TxConfig{Timeout: time.Second}, ledger.Retention{})
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun}.WithDefaults()
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: applyThrough{Store: e.store, rows: rows, count: count}, Executor: e.exec,
		Kind: executionsync.CloudRun, Now: e.clock.Now, LostGrace: cfg.LostGrace, Log: e.log})
	wf, err := executionsync.New(e.store, e.exec, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, e.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.engine = workflow.NewEngine(workflow.Options{Runs: e.runs, Now: e.clock.Now, Log: e.log}, wf.Definition(executionsync.CloudRun))
	stale := e.staleRows(total, succeeded)

	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "limit": 200})
	out := breakertest.Check(t, breakertest.Run{
		Engine: e.engine, Records: e.fs, Rows: count, Total: total, Concurrency: cfg.Concurrency, Budget: cfg.Budget,
		Req: workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: raw, Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: true}},
	})
	settled := 0
	for _, id := range stale {
		switch r := e.get(id); {
		case r.Active && r.Status == ledger.StatusRunning && r.Settlement == nil && r.Sync.Attempts == 0:
		case !r.Active && r.Status == ledger.StatusSucceeded && r.Settlement != nil && r.Settlement.WorkflowRunUUID == out.RunUUID:
			settled++
		default:
			t.Errorf("row %s half written: %+v", id, r)
		}
	}
	if settled > count.Healthy {
		t.Errorf("%d rows settled, but only %d transactions began before the outage", settled, count.Healthy)
	}
}
