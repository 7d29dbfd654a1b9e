package leasesettle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// An abandonment whose commit landed but whose answer was lost (Unavailable, which the client
// retries into "transaction is invalid or closed", or DeadlineExceeded) is read back: the lease
// carries this run's settlement, so it counts as settled by this run and is listed in its
// settlements with the fields it would have had. One whose commit never landed is abandoned by
// the run's extra try, and the read-back must not have counted it first.
func TestAnAmbiguousAbandonmentIsCountedByWhatTheLeaseHolds(t *testing.T) {
	sweeptest.EachAmbiguous(t, func(t *testing.T, fault *fsfaulttest.Commits) {
		e := newEnv(t, leasesettle.Config{}, nil)
		gone := e.instance(ledger.InstanceTerminated)
		ids := []string{e.lease(gone, time.Minute), e.lease(gone, 2*time.Minute)}
		e.lease(e.instance(ledger.InstanceRunning), time.Minute)
		slices.Sort(ids)

		store := ledger.NewLeaseStore(fault.Client(t, e.FS), ledger.TxConfig{})
		wf := leasesettle.New(store, leasesettle.Config{}, ledgertest.LocalClock(e.Clock.Now))
		run := workflow.Run{UUID: uuid.NewString(), Logger: logging.Discard()}
		out, stats, err := wf.RunOnce(context.Background(), run, leasesettle.Input{OrganizationUUID: e.org, RunnerGroupUUID: e.group, MaxSettlements: 10})
		if err != nil {
			t.Fatal(err)
		}
		if fault.Faulted() != 2 {
			t.Fatalf("faulted %d commits, want 2 (one per abandonment)", fault.Faulted())
		}
		var listed []string
		for _, s := range out.Settlements {
			listed = append(listed, s.LeaseUUID)
			if s.HolderUUID != gone || s.Reason != leasesettle.ReasonHolderTerminal || s.WorkspaceID == "" {
				t.Errorf("settlement %+v lacks the fields the run decided", s)
			}
		}
		slices.Sort(listed)
		if out.Settled != 2 || !slices.Equal(listed, ids) || stats.Raced != 0 || stats.Errored != 0 || out.Outcome != "settled" {
			t.Fatalf("settled %d %v, raced %d, errored %d, outcome %s; want %v settled by this run", out.Settled, listed, stats.Raced, stats.Errored, out.Outcome, ids)
		}
		for _, id := range ids {
			if l := e.get(id); l.Status != ledger.LeaseAbandoned || l.Settlement == nil || l.Settlement.WorkflowRunUUID != run.UUID {
				t.Errorf("%s: %+v, want abandoned by this run", id, l)
			}
		}
	})
}
