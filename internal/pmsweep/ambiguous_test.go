package pmsweep_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
)

// A reclaim whose commit landed but whose answer was lost (Unavailable, which the client
// retries into "transaction is invalid or closed", or DeadlineExceeded) is read back: the task's
// status head is the entry this sweep appended, so it counts as this sweep's, requeued or
// poisoned, with that entry's sha. One whose commit never landed is reclaimed by the sweep's
// extra try, and the read-back must not have counted it first.
func TestAnAmbiguousReclaimIsCountedByWhatTheTaskHolds(t *testing.T) {
	sweeptest.EachAmbiguous(t, func(t *testing.T, fault *fsfaulttest.Commits) {
		e := newEnv(t, pmsweep.Config{}, nil)
		ctx := context.Background()
		// task-000 was reclaimed once already; task-fresh never was.
		e.claimed(1)
		e.Clock.Advance(10 * time.Minute)
		e.sweep(pmsweep.Input{})
		if _, err := e.worker.Next(ctx, e.queue, "w1", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := e.worker.Enqueue(ctx, e.queue, "task-fresh", "slug-fresh", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := e.worker.Next(ctx, e.queue, "w2", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		e.Clock.Advance(10 * time.Minute)

		store := ledger.NewTaskStore(fault.Client(t, e.FS), ledger.TxConfig{})
		wf := pmsweep.New(store, pmsweep.Config{MaxReclaims: 1}, ledgertest.LocalClock(e.Clock.Now))
		out, stats, err := wf.RunOnce(ctx, pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "faulted"}, false, logging.Discard())
		if err != nil {
			t.Fatal(err)
		}
		if fault.Faulted() != 2 {
			t.Fatalf("faulted %d commits, want 2 (one per reclaim)", fault.Faulted())
		}
		if len(out.Raced) != 0 || stats.Errored != 0 || len(out.Reclaimed) != 1 || len(out.Poisoned) != 1 || stats.Poisoned != 1 {
			t.Fatalf("reclaimed %+v, poisoned %+v, raced %+v, errored %d; want one of each listed by this sweep", out.Reclaimed, out.Poisoned, out.Raced, stats.Errored)
		}
		for status, r := range map[string]pmsweep.Reclaimed{ledger.TaskNew: out.Reclaimed[0], ledger.TaskFailed: out.Poisoned[0]} {
			tk := e.task(r.Task)
			head := e.chain(r.Task, ledger.ChainStatuses)[0]
			if tk.Status != status || tk.StatusTip != r.ReclaimStatusSHA || head.Payload["reclaimer"] != "faulted" {
				t.Errorf("listed %s as %s with status %s; the task holds %+v, head %+v", r.Task, status, r.ReclaimStatusSHA, tk, head)
			}
		}
	})
}
