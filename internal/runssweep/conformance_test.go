package runssweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// pauser is the real store, but it has an operator pause the sweep right after the run's first
// abandonment commits, and counts the abandonments tried.
type pauser struct {
	runssweep.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) Abandon(ctx context.Context, runID string, pauses []string, s ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	a, err := p.Store.Abandon(ctx, runID, pauses, s, decide)
	p.Tried()
	return a, err
}

// A pause taken while a sweep is abandoning runs stops the runs it has not abandoned yet: the
// next transaction reads the fleet-wide pause with its run and writes nothing, the sweep tries no
// further run, and its stats count them paused. A run told to override the pause goes on; a
// pause that has ended refuses nothing.
func TestAPauseTakenMidSweepStopsTheRunsNotYetAbandoned(t *testing.T) {
	type pause struct {
		until    time.Duration // the pause's end after now; 0: none
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "paused", Paused: true, Case: pause{0, false}},
		{Name: "paused; the run overrides it", Paused: false, Case: pause{0, true}},
		{Name: "paused until a time already past", Paused: false, Case: pause{-time.Minute, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		e := newEnv(t, func(s runssweep.Store) runssweep.Store { p = &pauser{Store: s}; return p })
		// One run at a time, so that the pause falls between two abandonments.
		e.wf = runssweep.New(p, runssweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, ledgertest.LocalClock(e.Clock.Now))
		e.Run(e.wf.Definition())
		p.Pause = sweeptest.PauseWith(t, e.FS, func() pausestore.Pause {
			pause := pausestore.Pause{WorkflowType: string(contract.ExtensionRunsSweep), PausedBy: "op", PausedAt: e.Clock.Now().Add(-2 * time.Minute), Reason: "incident"}
			if c.until != 0 {
				pause.Until = e.Clock.Now().Add(c.until)
			}
			return pause
		})
		ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour), e.start("c", false, time.Hour)}

		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep,
			InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Pause: c.override}}, "sweep")
		o, s := testenv.DecodeRun[runssweep.Output, runssweep.Stats](t, out.Output, out.Stats)
		abandoned := 0
		for _, id := range ids {
			if e.run(id).Status == ledger.ExtensionFailed {
				abandoned++
			}
		}
		if s.Moved != 0 {
			t.Errorf("stats %+v: a run counted moved, but none moved", s)
		}
		return sweeptest.Swept{Settled: abandoned, Listed: o.Swept, Paused: s.Paused, Calls: p.Calls(), Said: fmt.Sprintf("stats %+v", s)}
	})
}

// A dry run reads the pause as the abandonments would, so its preview says the sweep would
// abandon nothing while paused; told to override the pause, it says what the sweep would do.
// Either way it writes nothing.
func TestADryRunOfAPausedSweepPreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "abandon", "keep/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, nil)
		sweeptest.Pause(t, e.FS, pausestore.Pause{WorkflowType: string(contract.ExtensionRunsSweep),
			PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "incident"})
		ids := []string{e.start("a", true, time.Hour), e.start("b", false, time.Hour)}
		e.Spy.Reset()
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep,
			InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerLocal, DryRun: true, Overrides: workflow.Overrides{Pause: override}},
			func(s runssweep.Stats) *explain.Preview { return s.Preview })
		for _, id := range ids {
			if r := e.run(id); r.Status != ledger.ExtensionRunning {
				t.Errorf("the dry run wrote run %s: %+v", id, r)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Paused, Spy: e.Spy}
	})
}

// Apps whose clocks are an hour off either way, moving as a live app does, are never abandoned;
// a run Firestore last saw two hours ago is (sweeptest.RunClockSkew).
func TestAppsAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	sweeptest.RunClockSkew(t, func(t *testing.T, fs *firestore.Client, clock firestoreconn.Clock) (workflow.Definition, sweeptest.Scope) {
		store := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
		tenant := "tenant-" + uuid.NewString()[:8]
		run := func(name string) ledger.ExtensionRun {
			return ledger.ExtensionRun{RunID: name, TenantID: tenant, ExtensionID: name, JobName: "j", Background: true}
		}
		return runssweep.New(store, runssweep.Config{}, clock).Definition(), sweeptest.Scope{
			// An hour's deadline: any clock an hour off on either side would cross it.
			Input: []byte(`{"older_than_ms": 3600000}`),
			Live: func(ctx context.Context, name string, now func() time.Time) error {
				writer := ledgertest.ExtensionRuns{Client: fs}
				if err := writer.Start(ctx, run(name), now()); err != nil {
					return err
				}
				return writer.Move(ctx, name)
			},
			Dead: func(ctx context.Context, name string, at time.Time) error {
				return ledgertest.ExtensionRuns{Client: fs, Now: testenv.Fixed(at)}.Start(ctx, run(name), time.Now())
			},
			Check: func(t *testing.T, out workflow.Outcome, live []string) {
				ctx := context.Background()
				if fmt.Sprint(out.Output["swept"]) != "1" {
					t.Errorf("swept %v, want only the run Firestore last saw two hours ago", out.Output["swept"])
				}
				for _, name := range live {
					if r, err := ledgertest.Value(store.Row(ctx, name)); err != nil || r.Status != ledger.ExtensionRunning {
						t.Errorf("the live app whose clock is %s was touched: %+v %v", name, r, err)
					}
				}
				if r, _ := ledgertest.Value(store.Row(ctx, "dead")); r.Outcome != ledger.OutcomeAbandoned {
					t.Errorf("the dead run = %+v, want abandoned", r)
				}
			},
		}
	})
}

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
	if res := settle(other); res.Swept || res.Why != runssweep.LeftNotRunning {
		t.Errorf("another run: %+v, want left not_running", res)
	}
	if r := e.run(id); r.Settlement.WorkflowRunUUID != first {
		t.Errorf("settled by %s, want %s", r.Settlement.WorkflowRunUUID, first)
	}
}

// The fleet has work exactly when one running invocation is idle past the deadline.
func TestTheProbeFindsAnIdleRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		moved []time.Duration // each running invocation last moved this long before now
		done  bool            // the idle one has finished
		want  bool
	}{
		{name: "no runs", want: false},
		{name: "only fresh runs", moved: []time.Duration{30 * time.Second, 59 * time.Second}, want: false},
		{name: "one idle past the deadline", moved: []time.Duration{30 * time.Second, 61 * time.Second}, want: true},
		{name: "idle but finished", moved: []time.Duration{2 * time.Minute}, done: true, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewExtensionRuns()
			for i, d := range c.moved {
				status := ledger.ExtensionRunning
				if c.done {
					status = ledger.ExtensionSucceeded
				}
				s.Put(ledger.ExtensionRun{RunID: string(rune('a' + i)), Status: status, LastMovedAt: epoch.Add(-d)})
			}
			sweeptest.Probe(t, runssweep.New(s, runssweep.Config{}, ledgertest.LocalClock(func() time.Time { return epoch })).Definition(),
				runssweep.Input{Limit: 10, OlderThanMs: 60000}, epoch, c.want)
		})
	}
}
