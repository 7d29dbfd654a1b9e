package memstore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

type tasksWorld struct {
	store pmsweep.Store
	put   func(ledger.Task)
	get   func(id string) ledger.Task
	// clock is the time the store stamps last_activity_at with: the time the caller passes in
	// memory (t0 here), Firestore's own on the ledger (its server timestamp).
	clock func() time.Time
}

func memoryTasks() tasksWorld {
	s := memstore.NewTasks()
	return tasksWorld{store: s, put: s.Put, get: func(id string) ledger.Task { tk, _ := s.Get("q", id); return tk },
		clock: func() time.Time { return t0 }}
}

func ledgerTasks(t *testing.T) func(fs *firestore.Client) tasksWorld {
	return func(fs *firestore.Client) tasksWorld {
		s := ledger.NewTaskStore(fs, txConfig)
		firestoreClock := firestoreconn.ServerClock(fs)
		return tasksWorld{store: s,
			put: func(tk ledger.Task) {
				set(t, fs, ledger.TaskQueuesCollection+"/"+tk.Queue+"/"+ledger.TasksCollection+"/"+tk.ID, tk)
			},
			get: func(id string) ledger.Task {
				tk, err := ledgertest.Value(s.Row(context.Background(), "q", id))
				if err != nil {
					t.Fatal(err)
				}
				return tk
			},
			clock: func() time.Time {
				now, err := firestoreClock(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return now
			}}
	}
}

func TestReclaimTaskHoldsTheLedgersFence(t *testing.T) {
	silent := t0.Add(-time.Hour)
	for _, c := range []struct {
		name         string
		status       string
		tip          string // the task's heartbeat tip
		activity     time.Time
		reclaims     int64
		maxReclaims  int64
		missing      bool
		wantWhy      ledger.Left
		wantPoisoned bool
		wantStatus   string
	}{
		{name: "unchanged since the scan", status: ledger.TaskWorking, tip: "hb", activity: silent, maxReclaims: 5, wantStatus: ledger.TaskNew},
		{name: "past the cap: poison", status: ledger.TaskWorking, tip: "hb", activity: silent, reclaims: 5, maxReclaims: 5, wantPoisoned: true, wantStatus: ledger.TaskFailed},
		{name: "no cap", status: ledger.TaskWorking, tip: "hb", activity: silent, reclaims: 50, wantStatus: ledger.TaskNew},
		{name: "heartbeat moved", status: ledger.TaskWorking, tip: "hb2", activity: silent, maxReclaims: 5, wantWhy: pmsweep.LeftHeartbeatMoved, wantStatus: ledger.TaskWorking},
		{name: "activity moved", status: ledger.TaskWorking, tip: "hb", activity: silent.Add(time.Second), maxReclaims: 5, wantWhy: pmsweep.LeftActivityMoved, wantStatus: ledger.TaskWorking},
		{name: "done", status: ledger.TaskDone, tip: "hb", activity: silent, maxReclaims: 5, wantWhy: pmsweep.LeftNotWorking, wantStatus: ledger.TaskDone},
		{name: "missing", missing: true, wantWhy: ledger.LeftTaskMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryTasks, ledgerTasks(t), func(t *testing.T, w tasksWorld) {
				if !c.missing {
					w.put(ledger.Task{Queue: "q", ID: "k", Slug: "s", Status: c.status, WorkerID: "w", CreatedAt: silent,
						LastActivityAt: c.activity, StatusTip: "st", HeartbeatTip: c.tip, ReclaimCount: c.reclaims})
				}
				now := w.clock()
				got, err := w.store.ReclaimTask(context.Background(), "q", "k", "sweeper", nil, now, pmsweep.Reclaimable(ledger.Task{HeartbeatTip: "hb", LastActivityAt: silent}, c.maxReclaims))
				if err != nil {
					t.Fatal(err)
				}
				after := w.clock()
				if got.Reclaimed != (c.wantWhy == "") || got.Why != c.wantWhy || got.Poisoned != c.wantPoisoned {
					t.Errorf("reclaimed %v why %q poisoned %v; want why %q poisoned %v", got.Reclaimed, got.Why, got.Poisoned, c.wantWhy, c.wantPoisoned)
				}
				if c.missing {
					return
				}
				tk := w.get("k")
				if tk.Status != c.wantStatus {
					t.Errorf("status after %q, want %q", tk.Status, c.wantStatus)
				}
				if !got.Reclaimed {
					if tk.HeartbeatTip != c.tip || tk.ReclaimCount != c.reclaims || tk.WorkerID != "w" {
						t.Errorf("a task left alone was written: %+v", tk)
					}
					return
				}
				if tk.StatusTip != got.StatusSHA || tk.HeartbeatTip == c.tip || tk.ReclaimCount != c.reclaims+1 || tk.WorkerID != "" ||
					tk.LastActivityAt.Before(now) || tk.LastActivityAt.After(after) || (tk.FailureReason != "") != c.wantPoisoned {
					t.Errorf("task after reclaim: %+v (status sha %s)", tk, got.StatusSHA)
				}
			})
		})
	}
}
