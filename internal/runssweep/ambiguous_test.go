package runssweep_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
)

// An abandonment whose commit landed but whose answer was lost (Unavailable, which the client
// retries into "transaction is invalid or closed", or DeadlineExceeded) is read back: the run
// carries this sweep's settlement, so it counts as swept by this sweep, listed in its output,
// with its interlock release counted.
func TestAnAmbiguousCommitThatLandedCountsAsSweptByThisRun(t *testing.T) {
	sweeptest.EachAmbiguous(t, func(t *testing.T, fault *fsfaulttest.Commits) {
		e := newEnv(t, nil)
		plain := e.start("plain", false, time.Hour)
		bg := e.start("bg", true, time.Hour)
		fs := fault.Client(t, e.FS)
		store := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
		wf := runssweep.New(store, runssweep.Config{}, ledgertest.LocalClock(e.Clock.Now))
		run := uuid.NewString()
		out, stats, err := wf.RunOnce(context.Background(), run, runssweep.Input{OlderThanMs: 600000, Limit: 10}, false, logging.Discard())
		if err != nil {
			t.Fatal(err)
		}
		if fault.Faulted() < 2 {
			t.Fatalf("faulted %d commits, want 2 (one per abandonment)", fault.Faulted())
		}
		if out.Swept != 2 || len(out.Runs) != 2 || stats.Moved != 0 || stats.Errored != 0 {
			t.Fatalf("swept %d, runs %v, moved %d, errored %d; want both swept by this run", out.Swept, out.Runs, stats.Moved, stats.Errored)
		}
		if stats.InterlocksReleased != 1 {
			t.Errorf("interlocks_released = %d, want 1", stats.InterlocksReleased)
		}
		for _, id := range []string{plain, bg} {
			if r := e.run(id); r.Settlement == nil || r.Settlement.WorkflowRunUUID != run {
				t.Errorf("%s: settlement %+v, want this run's", id, r.Settlement)
			}
		}
		if _, held := e.interlock("bg"); held {
			t.Error("the background run's interlock is still held")
		}
	})
}

// The read-back counts only this run's own settlement: a run another sweep abandoned first is
// left (moved) for this one, while this sweep's extra try on a run it abandoned itself finds it
// swept. Both go through ledger.AbandonedBy, the read-back's rule.
func TestOnlyThisRunsOwnSettlementCountsAsSweptByIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.start("ext", true, time.Hour)
	seen := e.run(id)
	deadline := e.Clock.Now().Add(-10 * time.Minute)
	first, other := uuid.NewString(), uuid.NewString()
	settle := func(run string) ledger.Abandonment {
		t.Helper()
		res, err := e.store.Abandon(context.Background(), id, nil, ledger.Settlement{At: e.Clock.Now(), WorkflowRunUUID: run, Reason: runssweep.ReasonIdle}, runssweep.Abandonable(seen, deadline))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := settle(first); !res.Swept || !res.InterlockReleased {
		t.Fatalf("first abandonment: %+v, want swept with its interlock released", res)
	}
	if res := settle(first); !res.Swept || !res.InterlockReleased {
		t.Errorf("the same run trying again: %+v, want swept by it, interlock released", res)
	}
	if res := settle(other); res.Swept || res.Why != ledger.LeftNotRunning {
		t.Errorf("another run: %+v, want left not_running", res)
	}
	if r := e.run(id); r.Settlement.WorkflowRunUUID != first {
		t.Errorf("settled by %s, want %s", r.Settlement.WorkflowRunUUID, first)
	}
}
