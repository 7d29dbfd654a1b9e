package leasesettle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Holders whose clocks are an hour off either way, heartbeating as a live holder does, never
// lose their leases — even when they cannot be resolved, the only case judged on heartbeat age:
// staleness is judged on Firestore's clock, as in production (server timestamps, ServerClock),
// and the run's own clock (here an hour ahead) does not enter it either. A lease Firestore last
// saw two hours ago is abandoned, so the run does settle.
func TestHoldersAndRunsWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ctx := context.Background()
	store := ledger.NewLeaseStore(fs, ledger.TxConfig{})
	runner := ledgertest.Leases{Client: fs}
	skewed := func() time.Time { return time.Now().Add(time.Hour) } // the run's own clock
	engine := workflow.NewEngine(workflow.Options{Runs: ledger.NewRunStore(fs), Now: skewed, Log: logging.Discard()},
		leasesettle.New(store, leasesettle.Config{}, ledger.ServerClock(fs)).Definition())
	org, group := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org)
	// An hour less a minute: any clock an hour off on either side would cross it.
	if err := runner.PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 3540}); err != nil {
		t.Fatal(err)
	}
	live := map[string]time.Duration{"behind": -time.Hour, "ahead": time.Hour}
	for name, skew := range live {
		holder := func() time.Time { return time.Now().Add(skew) }
		// The holder's instance record is missing: only the heartbeat's age speaks for it.
		lease := ledger.WorkspaceLease{UUID: name, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: name, HolderUUID: "unregistered-" + name}
		if err := runner.Acquire(ctx, lease, holder()); err != nil {
			t.Fatal(err)
		}
		if err := runner.Heartbeat(ctx, name, lease.HolderUUID); err != nil {
			t.Fatal(err)
		}
	}
	longAgo := ledgertest.Leases{Client: fs, Now: testenv.Fixed(time.Now().Add(-2 * time.Hour))}
	if err := longAgo.Acquire(ctx, ledger.WorkspaceLease{UUID: "dead", OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: "dead", HolderUUID: "gone"}, time.Now()); err != nil {
		t.Fatal(err)
	}

	raw, _ := json.Marshal(map[string]any{"organization_uuid": org, "runner_group_uuid": group})
	out, err := engine.Start(ctx, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerLocal})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("run: %v %v", out.Err, err)
	}
	var o leasesettle.Output
	testenv.Decode(t, out.Output, &o)
	if o.Examined != 3 || o.Settled != 1 || o.Settlements[0].LeaseUUID != "dead" {
		t.Errorf("output %+v, want only the lease Firestore last saw two hours ago abandoned", o)
	}
	for name := range live {
		if l, err := store.GetLease(ctx, name); err != nil || l.Status != ledger.LeaseActive {
			t.Errorf("the live holder whose clock is %s lost its lease: %+v %v", name, l, err)
		}
	}
}
