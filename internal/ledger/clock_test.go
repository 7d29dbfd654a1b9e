package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// The reference writers (ledgertest) stamp the staleness fields with Firestore's time, whatever
// the writer's own clock says, and ServerClock reads that same clock.
func TestWritersStampFirestoresTimeNotTheirOwn(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ctx := context.Background()
	clock := firestoreconn.ServerClock(fs)
	before, err := clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(before).Abs(); d > time.Minute {
		t.Fatalf("Firestore's clock reads %v, %v from this host's", before, d)
	}
	wrong := map[string]time.Time{"behind": before.Add(-time.Hour), "ahead": before.Add(time.Hour)}

	runs := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
	tasks := ledger.NewTaskStore(fs, ledger.TxConfig{})
	leases := ledger.NewLeaseStore(fs, ledger.TxConfig{})
	app, worker, runner := ledgertest.ExtensionRuns{Client: fs}, ledgertest.Tasks{Client: fs}, ledgertest.Leases{Client: fs}
	stamped := map[string]time.Time{}
	for name, at := range wrong {
		if err := app.Start(ctx, ledger.ExtensionRun{RunID: "run-" + name, TenantID: "t", ExtensionID: name, JobName: "j", Background: true}, at); err != nil {
			t.Fatal(err)
		}
		if err := app.Move(ctx, "run-"+name); err != nil {
			t.Fatal(err)
		}
		r, err := ledgertest.Value(runs.Row(ctx, "run-"+name))
		if err != nil {
			t.Fatal(err)
		}
		if !r.StartedAt.Equal(at.Truncate(time.Microsecond)) {
			t.Errorf("started_at %v, want the app's own %v", r.StartedAt, at)
		}
		stamped["extension run, "+name] = r.LastMovedAt

		if err := worker.Enqueue(ctx, "q", "task-"+name, "s", at); err != nil {
			t.Fatal(err)
		}
		l, err := worker.Next(ctx, "q", "w-"+name, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := worker.Heartbeat(ctx, l, at); err != nil {
			t.Fatal(err)
		}
		task, err := ledgertest.Value(tasks.Row(ctx, "q", l.TaskID))
		if err != nil {
			t.Fatal(err)
		}
		stamped["task, "+name] = task.LastActivityAt

		if err := runner.Acquire(ctx, ledger.WorkspaceLease{UUID: "lease-" + name, OrganizationUUID: "o", RunnerGroupUUID: "g", WorkspaceID: "w", HolderUUID: "h"}, at); err != nil {
			t.Fatal(err)
		}
		if err := runner.Heartbeat(ctx, "lease-"+name, "h"); err != nil {
			t.Fatal(err)
		}
		lease, err := ledgertest.Value(leases.Row(ctx, "lease-"+name))
		if err != nil {
			t.Fatal(err)
		}
		if !lease.AcquiredAt.Equal(at.Truncate(time.Microsecond)) {
			t.Errorf("acquired_at %v, want the holder's own %v", lease.AcquiredAt, at)
		}
		stamped["lease, "+name] = lease.HeartbeatAt
	}
	after, err := clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Errorf("Firestore's clock went from %v to %v", before, after)
	}
	for what, at := range stamped {
		if at.Before(before) || at.After(after) {
			t.Errorf("%s: staleness field %v, want Firestore's time of the write, between %v and %v", what, at, before, after)
		}
	}
	if len(stamped) != 6 {
		t.Errorf("checked %d fields", len(stamped))
	}
}
