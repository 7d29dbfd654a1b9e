package leasesettle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/breakertest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// abandonThrough runs each lease's settling transaction on another store, counted: the scan
// and the holder reads go on working, the rows meet the outage.
type abandonThrough struct {
	leasesettle.Store
	rows  *ledger.LeaseStore
	count *breakertest.Rows
}

func (a abandonThrough) AbandonLease(ctx context.Context, leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	a.count.Begin()
	return a.rows.AbandonLease(ctx, leaseID, reads, decide)
}

// Firestore goes away after the run has settled ten of 150 leases held by terminated instances:
// five settlements in a row fail the store's way, the run tries no more leases and fails
// store_unavailable long before its budget; every lease is either abandoned with its settlement
// or left active as it was.
func TestARunWhoseStoreGoesDownStopsAndFailsStoreUnavailable(t *testing.T) {
	t.Parallel()
	const total = 150
	e := newEnv(t, leasesettle.Config{}, nil)
	count := &breakertest.Rows{Outage: &fsfaulttest.Outage{}, Healthy: 10}
	rows := ledger.NewLeaseStore(count.Outage.Client(t, e.FS), ledger.TxConfig{Timeout: time.Second})
	cfg := leasesettle.Config{}.WithDefaults()
	e.wf = leasesettle.New(abandonThrough{Store: e.store, rows: rows, count: count}, cfg, ledgertest.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	leases := make([]string, total)
	for i := range leases {
		leases[i] = e.lease(e.instance("terminated"), time.Hour)
	}

	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group, "max_settlements": leasesettle.MaxSettlementsMax})
	out := breakertest.Check(t, breakertest.Run{
		Engine: e.Engine, Records: e.FS, Rows: count, Total: total, Concurrency: cfg.Concurrency, Budget: cfg.Budget,
		Req: workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: true}},
	})
	abandoned := 0
	for _, id := range leases {
		switch l := e.get(id); {
		case l.Status == ledger.LeaseActive && l.Settlement == nil:
		case l.Status == ledger.LeaseAbandoned && l.Settlement != nil && l.Settlement.WorkflowRunUUID == out.RunUUID && l.Settlement.Reason == leasesettle.ReasonHolderTerminal:
			abandoned++
		default:
			t.Errorf("lease %s half written: %+v", id, l)
		}
	}
	if abandoned > count.Healthy {
		t.Errorf("%d leases abandoned, but only %d transactions began before the outage", abandoned, count.Healthy)
	}
}
