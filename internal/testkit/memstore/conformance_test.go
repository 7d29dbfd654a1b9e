package memstore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// The in-memory stores are the workflows' stores.
var (
	_ runssweep.Store     = (*memstore.ExtensionRuns)(nil)
	_ pmsweep.Store       = (*memstore.Tasks)(nil)
	_ leasesettle.Store   = (*memstore.Leases)(nil)
	_ executionsync.Store = (*memstore.Executions)(nil)
	_ executionsync.Store = (*ledger.ExecutionStore)(nil)
)

func TestMain(m *testing.M) { testenv.Main(m) }

// txConfig gives the ledger's transactions more time than production's default: the cases are
// about what a transaction decides, and a loaded machine's emulator can be slow to start.
var txConfig = ledger.TxConfig{Timeout: time.Minute}

// t0 is whole seconds: every time below is one Firestore keeps exactly.
var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// Each conformance test runs every case against the in-memory store and, in the full tier,
// against the ledger's store on the emulator, writing the same documents into each: the fake is
// held to the real transaction's preconditions, not to a copy of them.
func implementations[W any](t *testing.T, memory func() W, real func(fs *firestore.Client) W, each func(t *testing.T, w W)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		each(t, memory())
	})
	t.Run("ledger", func(t *testing.T) {
		t.Parallel()
		each(t, real(testenv.Firestore(t)))
	})
}

func set(t *testing.T, fs *firestore.Client, path string, doc any) {
	t.Helper()
	if _, err := fs.Doc(path).Set(context.Background(), doc); err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
}

// runsWorld is one store of app invocations with what a case writes and reads back.
type runsWorld struct {
	store        runssweep.Store
	put          func(ledger.ExtensionRun)
	putInterlock func(tenant, extension, runID string)
	get          func(runID string) ledger.ExtensionRun
	interlock    func(tenant, extension string) (string, bool)
}

func memoryRuns() runsWorld {
	s := memstore.NewExtensionRuns()
	return runsWorld{store: s, put: s.Put, putInterlock: s.PutInterlock,
		get: func(id string) ledger.ExtensionRun { r, _ := s.Get(id); return r },
		interlock: func(tenant, ext string) (string, bool) {
			l, ok := s.Interlock(tenant, ext)
			return l.RunID, ok
		}}
}

func ledgerRuns(t *testing.T) func(fs *firestore.Client) runsWorld {
	return func(fs *firestore.Client) runsWorld {
		s := ledger.NewExtensionRunStore(fs, txConfig)
		return runsWorld{store: s,
			put: func(r ledger.ExtensionRun) { set(t, fs, ledger.ExtensionRunsCollection+"/"+r.RunID, r) },
			putInterlock: func(tenant, ext, runID string) {
				set(t, fs, ledger.ExtensionInterlocksCollection+"/"+ledger.InterlockID(tenant, ext), ledger.Interlock{RunID: runID, AcquiredAt: t0})
			},
			get: func(id string) ledger.ExtensionRun {
				r, err := ledgertest.Value(s.Row(context.Background(), id))
				if err != nil {
					t.Fatal(err)
				}
				return r
			},
			interlock: func(tenant, ext string) (string, bool) {
				l, ok, err := ledgertest.ExtensionRuns{Client: fs}.Interlock(context.Background(), tenant, ext)
				if err != nil {
					t.Fatal(err)
				}
				return l.RunID, ok
			}}
	}
}

func TestAbandonHoldsTheLedgersPreconditions(t *testing.T) {
	deadline := t0.Add(-time.Minute)
	idle := t0.Add(-time.Hour)
	for _, c := range []struct {
		name           string
		status         string
		background     bool
		lastMoved      time.Time
		seen           time.Time
		interlock      string // the run the interlock names; "" none
		missing        bool
		wantSwept      bool
		wantWhy        ledger.Left
		wantReleased   bool
		wantHolder     string
		wantInterlock  bool
		wantFinalState string
	}{
		{name: "idle and unmoved", status: ledger.ExtensionRunning, lastMoved: idle, seen: idle, wantSwept: true, wantFinalState: ledger.ExtensionFailed},
		{name: "background with its own interlock", status: ledger.ExtensionRunning, background: true, lastMoved: idle, seen: idle, interlock: "r",
			wantSwept: true, wantReleased: true, wantFinalState: ledger.ExtensionFailed},
		{name: "background, interlock held by another", status: ledger.ExtensionRunning, background: true, lastMoved: idle, seen: idle, interlock: "other",
			wantSwept: true, wantHolder: "other", wantInterlock: true, wantFinalState: ledger.ExtensionFailed},
		{name: "foreground leaves an interlock alone", status: ledger.ExtensionRunning, lastMoved: idle, seen: idle, interlock: "r",
			wantSwept: true, wantInterlock: true, wantFinalState: ledger.ExtensionFailed},
		{name: "moved since the scan", status: ledger.ExtensionRunning, lastMoved: idle.Add(time.Second), seen: idle, interlock: "r",
			wantWhy: runssweep.LeftMoved, wantInterlock: true, wantFinalState: ledger.ExtensionRunning},
		{name: "no longer idle", status: ledger.ExtensionRunning, lastMoved: deadline, seen: deadline, wantWhy: runssweep.LeftNotIdle, wantFinalState: ledger.ExtensionRunning},
		{name: "finished", status: ledger.ExtensionSucceeded, lastMoved: idle, seen: idle, wantWhy: runssweep.LeftNotRunning, wantFinalState: ledger.ExtensionSucceeded},
		{name: "missing", missing: true, wantWhy: ledger.LeftExtensionRunMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryRuns, ledgerRuns(t), func(t *testing.T, w runsWorld) {
				if !c.missing {
					w.put(ledger.ExtensionRun{RunID: "r", TenantID: "tn", ExtensionID: "ext", Background: c.background, Status: c.status, StartedAt: idle, LastMovedAt: c.lastMoved})
				}
				if c.interlock != "" {
					w.putInterlock("tn", "ext", c.interlock)
				}
				got, err := w.store.Abandon(context.Background(), "r", nil, ledger.Settlement{At: t0, Reason: "idle_past_deadline"}, runssweep.Abandonable(ledger.ExtensionRun{LastMovedAt: c.seen}, deadline))
				if err != nil {
					t.Fatal(err)
				}
				if got.Swept != c.wantSwept || got.Why != c.wantWhy || got.InterlockReleased != c.wantReleased || got.InterlockHolder != c.wantHolder {
					t.Errorf("swept %v why %q released %v holder %q; want %v %q %v %q",
						got.Swept, got.Why, got.InterlockReleased, got.InterlockHolder, c.wantSwept, c.wantWhy, c.wantReleased, c.wantHolder)
				}
				if c.missing {
					return
				}
				r := w.get("r")
				if r.Status != c.wantFinalState || (c.wantSwept && (r.Outcome != ledger.OutcomeAbandoned || !r.FinishedAt.Equal(t0))) {
					t.Errorf("run after: status %q outcome %q finished %v", r.Status, r.Outcome, r.FinishedAt)
				}
				if _, held := w.interlock("tn", "ext"); held != c.wantInterlock {
					t.Errorf("interlock held after: %v, want %v", held, c.wantInterlock)
				}
			})
		})
	}
}

// An Abandon tried again by the run that abandoned the row (its extra try after an ambiguous
// commit) finds it swept by itself, with what became of the interlock; another run finds it not
// running. Nothing is written again.
func TestAbandonByTheRunThatAbandonedItIsSweptAgainAndByAnotherIsNot(t *testing.T) {
	deadline := t0.Add(-time.Minute)
	idle := t0.Add(-time.Hour)
	for _, interlock := range []string{"r", "other"} {
		t.Run("interlock held by "+interlock, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryRuns, ledgerRuns(t), func(t *testing.T, w runsWorld) {
				w.put(ledger.ExtensionRun{RunID: "r", TenantID: "tn", ExtensionID: "ext", Background: true, Status: ledger.ExtensionRunning, StartedAt: idle, LastMovedAt: idle})
				w.putInterlock("tn", "ext", interlock)
				abandon := func(run string, at time.Time) ledger.Abandonment {
					t.Helper()
					got, err := w.store.Abandon(context.Background(), "r", nil, ledger.Settlement{At: at, WorkflowRunUUID: run, Reason: "idle_past_deadline"},
						runssweep.Abandonable(ledger.ExtensionRun{LastMovedAt: idle}, deadline))
					if err != nil {
						t.Fatal(err)
					}
					return got
				}
				first := abandon("run-1", t0)
				again := abandon("run-1", t0.Add(time.Second))
				if !again.Swept || again.InterlockReleased != first.InterlockReleased || again.InterlockHolder != first.InterlockHolder || first.InterlockReleased != (interlock == "r") {
					t.Errorf("first %+v, again %+v; want the same abandonment twice", first, again)
				}
				if other := abandon("run-2", t0.Add(time.Second)); other.Swept || other.Why != runssweep.LeftNotRunning {
					t.Errorf("another run: %+v, want left not_running", other)
				}
				if r := w.get("r"); r.Settlement == nil || r.Settlement.WorkflowRunUUID != "run-1" || !r.FinishedAt.Equal(t0) {
					t.Errorf("run after: %+v, want run-1's abandonment, written once", r)
				}
			})
		})
	}
}
