package memstore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// pauseCases are what a settling call given the pause ids of workflow "wf" on scope "s" finds:
// a pause of it that holds refuses; one that has ended, or another scope's, does not.
var pauseCases = []struct {
	name   string
	pause  *pausestore.Pause // nil: none
	paused bool
}{
	{"no pause", nil, false},
	{"its scope is paused", &pausestore.Pause{WorkflowType: "wf", Scope: "s"}, true},
	{"it is paused fleet-wide", &pausestore.Pause{WorkflowType: "wf"}, true},
	{"its scope's pause has ended", &pausestore.Pause{WorkflowType: "wf", Scope: "s", Until: t0.Add(-time.Minute)}, false},
	{"another scope is paused", &pausestore.Pause{WorkflowType: "wf", Scope: "s2"}, false},
	{"another workflow is paused fleet-wide", &pausestore.Pause{WorkflowType: "wf2"}, false},
}

// pausedImplementations is implementations for a case that also writes a pause: each is handed,
// with its world, how that store takes the pause — memory's PutPause, or sweep_pauses on the
// emulator.
func pausedImplementations[W any](t *testing.T, memory func() (W, *memstore.Pauses), real func(fs *firestore.Client) W, each func(t *testing.T, w W, putPause func(*pausestore.Pause))) {
	type world struct {
		w      W
		memory *memstore.Pauses
		fs     *firestore.Client
	}
	implementations(t, func() world {
		w, pauses := memory()
		return world{w: w, memory: pauses}
	}, func(fs *firestore.Client) world { return world{w: real(fs), fs: fs} }, func(t *testing.T, w world) {
		each(t, w.w, func(p *pausestore.Pause) { putPause(t, w.memory, w.fs, p) })
	})
}

// putPause writes p, when there is one, into memory or, when that is nil, into fs.
func putPause(t *testing.T, memory *memstore.Pauses, fs *firestore.Client, p *pausestore.Pause) {
	t.Helper()
	if p == nil {
		return
	}
	pause := *p // the cases are shared by parallel tests
	pause.PausedBy, pause.PausedAt, pause.Reason = "op", t0.Add(-time.Hour), "incident"
	if memory != nil {
		memory.PutPause(pause)
		return
	}
	if err := pausestore.New(fs).Put(context.Background(), pause); err != nil {
		t.Fatal(err)
	}
}

// Abandon, ReclaimTask and AbandonLease read the pauses they are given with their row, as the
// ledger's transactions do, and write nothing while one holds.
func TestSettlingCallsRefuseAPausedScopeAsTheLedgerDoes(t *testing.T) {
	ids := pausestore.PauseIDs("wf", "s")
	idle := t0.Add(-time.Hour)
	for _, c := range pauseCases {
		t.Run("Abandon/"+c.name, func(t *testing.T) {
			t.Parallel()
			pausedImplementations(t, func() (runsWorld, *memstore.Pauses) {
				s := memstore.NewExtensionRuns()
				s.Now = func() time.Time { return t0 }
				w := memoryRuns()
				w.store, w.put = s, s.Put
				w.get = func(id string) ledger.ExtensionRun { r, _ := s.Get(id); return r }
				return w, &s.Pauses
			}, ledgerRuns(t), func(t *testing.T, w runsWorld, putPause func(*pausestore.Pause)) {
				w.put(ledger.ExtensionRun{RunID: "r", TenantID: "tn", ExtensionID: "ext", Status: ledger.ExtensionRunning, StartedAt: idle, LastMovedAt: idle})
				putPause(c.pause)
				got, err := w.store.Abandon(context.Background(), "r", ids, ledger.Settlement{At: t0, Reason: runssweep.ReasonIdle},
					runssweep.Abandonable(ledger.ExtensionRun{LastMovedAt: idle}, t0.Add(-time.Minute)))
				if err != nil {
					t.Fatal(err)
				}
				status := w.get("r").Status
				switch {
				case c.paused && (got.Swept || got.Why != ledger.LeftPaused || got.Pause == nil || status != ledger.ExtensionRunning):
					t.Errorf("swept %v why %q pause %v, status after %q; want left paused, still running", got.Swept, got.Why, got.Pause, status)
				case !c.paused && (!got.Swept || status != ledger.ExtensionFailed):
					t.Errorf("swept %v why %q, status after %q; want abandoned", got.Swept, got.Why, status)
				}
			})
		})
		t.Run("ReclaimTask/"+c.name, func(t *testing.T) {
			t.Parallel()
			pausedImplementations(t, func() (tasksWorld, *memstore.Pauses) {
				s := memstore.NewTasks()
				s.Now = func() time.Time { return t0 }
				return tasksWorld{store: s, put: s.Put, get: func(id string) ledger.Task { tk, _ := s.Get("q", id); return tk }}, &s.Pauses
			}, ledgerTasks(t), func(t *testing.T, w tasksWorld, putPause func(*pausestore.Pause)) {
				w.put(ledger.Task{Queue: "q", ID: "k", Slug: "k", Status: ledger.TaskWorking, WorkerID: "w", CreatedAt: idle, LastActivityAt: idle, HeartbeatTip: "hb"})
				putPause(c.pause)
				got, err := w.store.ReclaimTask(context.Background(), "q", "k", "sweeper", ids, t0,
					pmsweep.Reclaimable(ledger.Task{HeartbeatTip: "hb", LastActivityAt: idle}, 0))
				if err != nil {
					t.Fatal(err)
				}
				tk := w.get("k")
				switch {
				case c.paused && (got.Reclaimed || got.Why != ledger.LeftPaused || got.Pause == nil || tk.Status != ledger.TaskWorking || tk.HeartbeatTip != "hb"):
					t.Errorf("reclaimed %v why %q pause %v, task after %+v; want left paused, untouched", got.Reclaimed, got.Why, got.Pause, tk)
				case !c.paused && (!got.Reclaimed || tk.Status != ledger.TaskNew):
					t.Errorf("reclaimed %v why %q, task after %+v; want requeued", got.Reclaimed, got.Why, tk)
				}
			})
		})
		t.Run("AbandonLease/"+c.name, func(t *testing.T) {
			t.Parallel()
			pausedImplementations(t, func() (leasesWorld, *memstore.Pauses) {
				s := memstore.NewLeases()
				s.Now = func() time.Time { return t0 }
				return leasesWorld{store: s, put: s.Put, instance: s.PutInstance, org: s.PutOrganization,
					get: func(id string) ledger.WorkspaceLease { l, _ := s.Get(id); return l }}, &s.Pauses
			}, ledgerLeases(t), func(t *testing.T, w leasesWorld, putPause func(*pausestore.Pause)) {
				w.put(ledger.WorkspaceLease{UUID: "l", OrganizationUUID: "o", RunnerGroupUUID: "g", WorkspaceID: "ws", Status: ledger.LeaseActive, AcquiredAt: idle, HeartbeatAt: idle})
				putPause(c.pause)
				asked := false
				abandoned, refused, err := w.store.AbandonLease(context.Background(), "l", ledger.Reads{Pauses: ids},
					func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string) {
						asked = true
						return &ledger.Settlement{At: t0, Reason: "test"}, ""
					})
				if err != nil {
					t.Fatal(err)
				}
				l := w.get("l")
				switch {
				case c.paused && (abandoned || refused != string(ledger.LeftPaused) || asked || l.Status != ledger.LeaseActive):
					t.Errorf("abandoned %v refused %q asked %v, lease after %q; want refused paused without asking, still active", abandoned, refused, asked, l.Status)
				case !c.paused && (!abandoned || refused != "" || l.Status != ledger.LeaseAbandoned):
					t.Errorf("abandoned %v refused %q, lease after %q; want abandoned", abandoned, refused, l.Status)
				}
			})
		})
	}
}
