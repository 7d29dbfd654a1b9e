package leasesettle_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Holders whose clocks are an hour off either way, heartbeating as a live holder does, never
// lose their leases — even when they cannot be resolved, the only case judged on heartbeat age;
// a lease Firestore last saw two hours ago is abandoned (sweeptest.RunClockSkew).
func TestHoldersAndRunsWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	var store *ledger.LeaseStore
	sweeptest.RunClockSkew(t, sweeptest.ClockSkew{
		New: func(fs *firestore.Client, clock ledger.Clock) workflow.Definition {
			store = ledger.NewLeaseStore(fs, ledger.TxConfig{})
			return leasesettle.New(store, leasesettle.Config{}, clock).Definition()
		},
		Scope: func(t *testing.T, fs *firestore.Client) sweeptest.Scope {
			ctx := context.Background()
			org, group := uuid.NewString(), uuid.NewString()
			testenv.Enable(t, fs, org)
			// An hour less a minute: any clock an hour off on either side would cross it.
			if err := (ledgertest.Leases{Client: fs}).PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 3540}); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(map[string]any{"organization_uuid": org, "runner_group_uuid": group})
			return sweeptest.Scope{
				Input: raw,
				Live: func(ctx context.Context, name string, holder func() time.Time) error {
					// The holder's instance record is missing: only the heartbeat's age speaks for it.
					lease := ledger.WorkspaceLease{UUID: name, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: name, HolderUUID: "unregistered-" + name}
					if err := (ledgertest.Leases{Client: fs}).Acquire(ctx, lease, holder()); err != nil {
						return err
					}
					return (ledgertest.Leases{Client: fs}).Heartbeat(ctx, name, lease.HolderUUID)
				},
				Dead: func(ctx context.Context, name string, at time.Time) error {
					longAgo := ledgertest.Leases{Client: fs, Now: testenv.Fixed(at)}
					return longAgo.Acquire(ctx, ledger.WorkspaceLease{UUID: name, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: name, HolderUUID: "gone"}, time.Now())
				},
				Check: func(t *testing.T, out workflow.Outcome, live []string) {
					var o leasesettle.Output
					testenv.Decode(t, out.Output, &o)
					if o.Examined != 3 || o.Settled != 1 || o.Settlements[0].LeaseUUID != "dead" {
						t.Errorf("output %+v, want only the lease Firestore last saw two hours ago abandoned", o)
					}
					for _, name := range live {
						if l, err := ledgertest.Value(store.Row(context.Background(), name)); err != nil || l.Status != ledger.LeaseActive {
							t.Errorf("the live holder whose clock is %s lost its lease: %+v %v", name, l, err)
						}
					}
				},
			}
		},
	})
}
