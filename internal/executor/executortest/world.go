package executortest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// world is one workflow case's world: its own Firestore project, the harness's fake, a clock,
// and the execution-sync workflow wired over the adapter as the app wires it, with a spy between
// them.
type world struct {
	t      *testing.T
	h      Harness
	fake   Fake
	spy    *observeSpy
	fsSpy  *fsspy.Spy
	store  *ledger.ExecutionStore
	rows   ledgertest.Executions
	runs   *runstore.Store
	clock  *testenv.Clock
	engine *workflow.Engine
	org    string
}

type worldOptions struct {
	concurrency int
	grace       time.Duration
	limits      Limits
	// dial adds options to the Firestore connection (a fault interceptor).
	dial []grpc.DialOption
}

func newWorld(t *testing.T, h Harness, o worldOptions) *world {
	t.Helper()
	w := &world{t: t, h: h, fsSpy: fsspy.New(), clock: testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)), org: uuid.NewString()}
	fs := testenv.Firestore(t, append(w.fsSpy.DialOptions(), o.dial...)...)
	testenv.Enable(t, fs, w.org)
	w.store = ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	w.rows = ledgertest.Executions{Client: fs}
	w.runs = runstore.New(fs)
	w.fake = h.New(t, w.clock.Now, o.limits)
	w.spy = &observeSpy{Executor: w.fake.Executor(), fake: w.fake}
	w.engine = wire(t, h.Kind, w.spy, w.store, w.runs, w.clock.Now, o.concurrency, o.grace)
	return w
}

// wire builds the workflow of kind over exec as the app does (inline syncs, no guard).
func wire(t *testing.T, kind executionsync.Kind, exec executor.Executor, store *ledger.ExecutionStore, runs *runstore.Store,
	now func() time.Time, concurrency int, grace time.Duration) *workflow.Engine {
	t.Helper()
	cfg := executionsync.Config{Provider: kind.Provider, Concurrency: concurrency, LostGrace: grace}.WithDefaults()
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: exec, Kind: kind, Now: now, LostGrace: cfg.LostGrace})
	wf, err := executionsync.New(store, exec, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	return workflow.NewEngine(workflow.Options{Runs: runs, Now: now, Log: logging.Discard()}, wf.Definition(kind))
}

// seed creates n executions in state on target 0, each with a stale active row naming it, and
// returns the rows as read back.
func (w *world) seed(n int, state State) map[string]ledger.Execution {
	w.t.Helper()
	out := make(map[string]ledger.Execution, n)
	for range n {
		ref := w.fake.Put(0, state, w.clock.Now().Add(-11*time.Minute))
		id := uuid.NewString()
		if err := w.rows.Put(context.Background(), ledger.Execution{UUID: id, OrganizationUUID: w.org, RunnerGroupUUID: "group-1",
			Provider: w.h.Kind.Provider, ProviderRef: ref, Status: ledger.StatusRunning, Active: true,
			ObservedAt: w.clock.Now().Add(-10 * time.Minute)}); err != nil {
			w.t.Fatal(err)
		}
		out[id] = w.get(id)
	}
	return out
}

func (w *world) get(id string) ledger.Execution {
	w.t.Helper()
	r, err := w.store.Get(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// start runs the workflow over the organization (limit 200) and decodes its output and stats.
func (w *world) start() (workflow.Outcome, executionsync.Output, executionsync.Stats) {
	w.t.Helper()
	out, err := w.engine.Start(context.Background(), workflow.Request{Type: w.h.Kind.Type,
		InitialData: json.RawMessage(`{"organization_uuid": "` + w.org + `", "limit": 200}`), Trigger: workflow.TriggerLocal, Actor: "test"})
	if err != nil {
		w.t.Fatalf("start: %v", err)
	}
	var o executionsync.Output
	var s executionsync.Stats
	testenv.Decode(w.t, out.Output, &o)
	testenv.Decode(w.t, out.Stats, &s)
	if got := o.StartedCount + o.SkippedMissingMetadataCount + o.FailedStartCount; got != o.CandidateCount {
		w.t.Errorf("counts do not add up: started %d + skipped %d + failed %d != candidates %d",
			o.StartedCount, o.SkippedMissingMetadataCount, o.FailedStartCount, o.CandidateCount)
	}
	if len(o.StartedRunnerExecutionUUIDs) != o.StartedCount || len(o.FailedRunnerExecutionUUIDs) != o.FailedStartCount {
		w.t.Errorf("uuid lists disagree with their counts: %d/%d started, %d/%d failed",
			len(o.StartedRunnerExecutionUUIDs), o.StartedCount, len(o.FailedRunnerExecutionUUIDs), o.FailedStartCount)
	}
	return out, o, s
}

// settlementWrites counts, per row, the committed writes that touch its settlement.
func (w *world) settlementWrites() map[string]int {
	out := map[string]int{}
	for doc, n := range w.fsSpy.WritesTouching("settlement") {
		if strings.Contains(doc, "/"+ledger.ExecutionsCollection+"/") {
			out[fsspy.DocID(doc)] += n
		}
	}
	return out
}

// observeSpy stands between the workflow and the adapter: it counts the observations begun,
// arms one fault of the fake when the failAt-th begins, and counts the observations begun after
// an observation came back ResourceExhausted.
type observeSpy struct {
	executor.Executor
	fake Fake

	mu        sync.Mutex
	failAt    int
	begun     int
	after     int
	exhausted int
}

func (s *observeSpy) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	s.mu.Lock()
	s.begun++
	if s.exhausted > 0 {
		s.after++
	}
	if s.begun == s.failAt {
		s.fake.FailNext(codes.ResourceExhausted, 1)
	}
	s.mu.Unlock()
	snap, err := s.Executor.Observe(ctx, ref)
	if status.Code(err) == codes.ResourceExhausted {
		s.mu.Lock()
		s.exhausted++
		s.mu.Unlock()
	}
	return snap, err
}

// throttleAt arms a ResourceExhausted for the call of the failAt-th observation.
func (s *observeSpy) throttleAt(failAt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAt = failAt
}

func (s *observeSpy) counts() (begun, after, exhausted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun, s.after, s.exhausted
}
