package pmsweep_test

import (
	"context"
	"encoding/json"
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
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// pauser is the real store, but it has an operator pause the sweep right after the run's first
// reclaim commits, and counts the reclaims tried.
type pauser struct {
	pmsweep.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	r, err := p.Store.ReclaimTask(ctx, queue, id, reclaimer, pauses, now, decide)
	p.Tried()
	return r, err
}

// A pause of the queue (or fleet-wide) taken while a sweep is reclaiming stops the tasks it has
// not reclaimed yet: the next transaction reads the pause with its task and writes nothing, the
// sweep tries no further task, and its stats count them paused. A run told to override the pause
// goes on, and another queue's pause stops nothing.
func TestAPauseTakenMidSweepStopsTheTasksNotYetReclaimed(t *testing.T) {
	type pause struct {
		scope    func(queue string) string
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "its queue is paused", Paused: true, Case: pause{func(q string) string { return q }, false}},
		{Name: "it is paused fleet-wide", Paused: true, Case: pause{func(string) string { return "" }, false}},
		{Name: "its queue is paused; the run overrides it", Paused: false, Case: pause{func(q string) string { return q }, true}},
		{Name: "another queue is paused", Paused: false, Case: pause{func(q string) string { return q + "-other" }, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		// One task at a time, so that the pause falls between two reclaims.
		e := newEnv(t, pmsweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, func(s pmsweep.Store) pmsweep.Store { p = &pauser{Store: s}; return p })
		p.Pause = sweeptest.PauseWith(t, e.FS, func() pausestore.Pause {
			return pausestore.Pause{WorkflowType: string(contract.PMSweep),
				Scope: c.scope(e.queue), PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "queue migration"}
		})
		leases := e.claimed(3)
		heartbeats := map[string]int{}
		for _, l := range leases {
			heartbeats[l.TaskID] = len(e.chain(l.TaskID, ledger.ChainHeartbeats))
		}
		e.Clock.Advance(time.Hour)

		raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "sweeper"})
		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw,
			Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Pause: c.override}}, "sweep")
		o, s := testenv.DecodeRun[pmsweep.Output, pmsweep.Stats](t, out.Output, out.Stats)
		requeued := 0
		for _, l := range leases {
			if tk := e.task(l.TaskID); tk.Status == ledger.TaskNew {
				requeued++
			} else if n := len(e.chain(l.TaskID, ledger.ChainHeartbeats)); n != heartbeats[l.TaskID] {
				t.Errorf("task %s was left working, but its heartbeat chain has %d entries, not %d", l.TaskID, n, heartbeats[l.TaskID])
			}
		}
		if len(o.Raced) != 0 {
			t.Errorf("output %+v: a task listed raced, but none moved", o)
		}
		return sweeptest.Swept{Settled: requeued, Listed: len(o.Reclaimed), Paused: s.Paused, Calls: p.Calls(), Said: fmt.Sprintf("output %+v, stats %+v", o, s)}
	})
}

// A dry run reads the pause as the reclaims would: its preview keeps the paused queue's tasks
// "paused", and, told to override the pause, says what the sweep would reclaim. Either way it
// writes nothing.
func TestADryRunOfAPausedQueuePreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "reclaim", "keep/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, pmsweep.Config{}, nil)
		sweeptest.Pause(t, e.FS, pausestore.Pause{WorkflowType: string(contract.PMSweep),
			Scope: e.queue, PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "queue migration"})
		leases := e.claimed(2)
		e.Clock.Advance(time.Hour)
		e.Spy.Reset()
		raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "sweeper"})
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw,
			Trigger: workflow.TriggerLocal, DryRun: true, Overrides: workflow.Overrides{Pause: override}},
			func(s pmsweep.Stats) *explain.Preview { return s.Preview })
		for _, l := range leases {
			if tk := e.task(l.TaskID); tk.Status != ledger.TaskWorking {
				t.Errorf("the dry run wrote task %s: %+v", l.TaskID, tk)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Paused, Spy: e.Spy}
	})
}

// Workers whose clocks are an hour off either way, heartbeating as a live worker does, are never
// reclaimed; a task Firestore last saw two hours ago is (sweeptest.RunClockSkew).
func TestWorkersAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	sweeptest.RunClockSkew(t, func(t *testing.T, fs *firestore.Client, clock firestoreconn.Clock) (workflow.Definition, sweeptest.Scope) {
		tasks := ledger.NewTaskStore(fs, ledger.TxConfig{})
		queue := "q-" + uuid.NewString()[:8]
		// A TTL of an hour less a minute: any clock an hour off on either side would cross it.
		raw, _ := json.Marshal(pmsweep.Input{Queue: queue, TTL: 3540, Reclaimer: "janitor"})
		return pmsweep.New(tasks, pmsweep.Config{}, clock).Definition(), sweeptest.Scope{
			Input: raw,
			Live: func(ctx context.Context, name string, worker func() time.Time) error {
				if err := (ledgertest.Tasks{Client: fs}).Enqueue(ctx, queue, name, name, worker()); err != nil {
					return err
				}
				l, err := ledgertest.Tasks{Client: fs}.Next(ctx, queue, "worker-"+name, worker())
				if err != nil {
					return err
				}
				_, err = ledgertest.Tasks{Client: fs}.Heartbeat(ctx, l, worker())
				return err
			},
			Dead: func(ctx context.Context, name string, at time.Time) error {
				longAgo := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(at)}
				if err := longAgo.Enqueue(ctx, queue, name, name, time.Now()); err != nil {
					return err
				}
				_, err := longAgo.Next(ctx, queue, "worker-"+name, time.Now())
				return err
			},
			Check: func(t *testing.T, out workflow.Outcome, live []string) {
				var o pmsweep.Output
				testenv.Decode(t, out.Output, &o)
				if o.Scanned != 3 || len(o.Reclaimed) != 1 || o.Reclaimed[0].Task != "dead" || len(o.Raced) != 0 {
					t.Errorf("output %+v, want only the task Firestore last saw two hours ago reclaimed", o)
				}
				for _, name := range live {
					if task, err := ledgertest.Value(tasks.Row(context.Background(), queue, name)); err != nil || task.Status != ledger.TaskWorking || task.ReclaimCount != 0 {
						t.Errorf("the live worker whose clock is %s lost its task: %+v %v", name, task, err)
					}
				}
			},
		}
	})
}

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

// A queue has work exactly when its least recently active working task is silent for the TTL,
// or cannot be read.
func TestTheProbeFindsASilentTask(t *testing.T) {
	for _, c := range []struct {
		name string
		put  func(s *memstore.Tasks)
		want bool
	}{
		{name: "no tasks", put: func(*memstore.Tasks) {}, want: false},
		{name: "working, recently active", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-59 * time.Second)})
		}, want: false},
		{name: "working, silent for the TTL", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-60 * time.Second)})
		}, want: true},
		{name: "silent but done", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskDone, LastActivityAt: epoch.Add(-time.Hour)})
		}, want: false},
		{name: "silent in another queue", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "other", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-time.Hour)})
		}, want: false},
		{name: "unreadable", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch, Malformed: "x"})
		}, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewTasks()
			c.put(s)
			sweeptest.Probe(t, pmsweep.New(s, pmsweep.Config{}, ledgertest.LocalClock(func() time.Time { return epoch })).Definition(),
				pmsweep.Input{Queue: "q", TTL: 60}, epoch, c.want)
		})
	}
}
