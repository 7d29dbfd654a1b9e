package runstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestRunRecordTransitions(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	runs := runstore.New(fs)
	ctx := context.Background()
	rec := runstore.RunRecord{WorkflowRunUUID: "run-1", WorkflowType: "w", Status: "initiated", InitiatedAt: t0, UpdatedAt: t0,
		History: []runstore.StateEntry{{State: "initiated", At: t0}}}
	if err := runs.CreateRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := runs.CreateRun(ctx, rec); !errors.Is(err, runstore.ErrRunExists) {
		t.Errorf("second create: %v, want ErrRunExists", err)
	}
	if err := runs.TransitionRun(ctx, "run-1", []string{"reconciling"}, "completed", t0, runstore.RunUpdate{}); !errors.Is(err, runstore.ErrBadTransition) {
		t.Errorf("skipping a state: %v, want ErrBadTransition", err)
	}
	if err := runs.TransitionRun(ctx, "run-1", []string{"initiated"}, "reconciling", t0.Add(time.Second), runstore.RunUpdate{}); err != nil {
		t.Fatal(err)
	}
	if err := runs.TransitionRun(ctx, "run-1", []string{"reconciling"}, "completed", t0.Add(2*time.Second),
		runstore.RunUpdate{Output: map[string]any{"n": int64(3)}, CompletedAt: t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := runs.TransitionRun(ctx, "run-1", []string{"initiated", "reconciling"}, "failed", t0, runstore.RunUpdate{}); !errors.Is(err, runstore.ErrBadTransition) {
		t.Errorf("leaving a terminal state: %v, want ErrBadTransition", err)
	}
	got, err := runs.GetRun(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || len(got.History) != 3 || got.Output["n"] != int64(3) || !got.CompletedAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("record = %+v", got)
	}
}

func TestStartRunTakesTheGuardAndCreatesTheRecordTogether(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	runs := runstore.New(fs)
	ctx := context.Background()
	record := func(id string) runstore.RunRecord {
		return runstore.RunRecord{WorkflowRunUUID: id, WorkflowType: "w", Status: "reconciling", InitiatedAt: t0, UpdatedAt: t0}
	}
	claim := func(id string, at time.Time) *runstore.GuardClaim {
		return &runstore.GuardClaim{Key: "w:org", TTL: time.Minute, Guard: runstore.Guard{WorkflowRunUUID: id, WorkflowType: "w", Scope: "org", AcquiredAt: at}}
	}
	exists := func(coll, id string) bool {
		_, err := fs.Collection(coll).Doc(id).Get(ctx)
		return err == nil
	}
	holder := func() string {
		snap, err := fs.Collection(ledger.GuardsCollection).Doc("w:org").Get(ctx)
		if err != nil {
			return ""
		}
		h, _ := snap.DataAt("workflow_run_uuid")
		s, _ := h.(string)
		return s
	}

	if expired, err := runs.StartRun(ctx, record("a"), claim("a", t0)); err != nil || expired != nil {
		t.Fatalf("first start: expired %v, err %v", expired, err)
	}
	if !exists(ledger.RunsCollection, "a") || holder() != "a" {
		t.Fatalf("after the first start: record %v, guard held by %q", exists(ledger.RunsCollection, "a"), holder())
	}
	// A live guard refuses another run, and nothing of that run is written.
	if _, err := runs.StartRun(ctx, record("b"), claim("b", t0.Add(30*time.Second))); !errors.Is(err, runstore.ErrGuardHeld) {
		t.Errorf("start under a live guard: %v, want ErrGuardHeld", err)
	}
	if exists(ledger.RunsCollection, "b") || holder() != "a" {
		t.Errorf("a refused start wrote: record %v, guard held by %q", exists(ledger.RunsCollection, "b"), holder())
	}
	// Finishing the run releases its guard in the same transaction.
	if err := runs.TransitionRun(ctx, "a", []string{"reconciling"}, "completed", t0, runstore.RunUpdate{ReleaseGuard: "w:org"}); err != nil {
		t.Fatal(err)
	}
	if h := holder(); h != "" {
		t.Fatalf("guard still held by %q after the run finished", h)
	}
	// A uuid already used is refused, and the guard is not taken for it.
	if _, err := runs.StartRun(ctx, record("a"), claim("a", t0.Add(2*time.Minute))); !errors.Is(err, runstore.ErrRunExists) {
		t.Errorf("restart of a finished run: %v, want ErrRunExists", err)
	}
	if h := holder(); h != "" {
		t.Errorf("a refused restart took the guard for %q", h)
	}
	// An expired guard is taken over and returned; finishing a run that no longer holds the
	// guard leaves the new holder's guard alone.
	if _, err := runs.StartRun(ctx, record("dead"), claim("dead", t0)); err != nil {
		t.Fatal(err)
	}
	expired, err := runs.StartRun(ctx, record("c"), claim("c", t0.Add(5*time.Minute)))
	if err != nil || expired == nil || expired.WorkflowRunUUID != "dead" {
		t.Fatalf("take over an expired guard: expired %+v, err %v", expired, err)
	}
	if err := runs.CreateRun(ctx, record("d")); err != nil {
		t.Fatal(err)
	}
	if err := runs.TransitionRun(ctx, "d", []string{"reconciling"}, "completed", t0, runstore.RunUpdate{ReleaseGuard: "w:org"}); err != nil {
		t.Fatal(err)
	}
	if h := holder(); h != "c" {
		t.Errorf("another run's finish released the guard of %q", h)
	}
}

func TestStorableJSONKeepsIntegersIntegers(t *testing.T) {
	m, err := runstore.StorableJSON([]byte(`{"a": 1, "b": 1.5, "c": [2, {"d": 9007199254740991}], "e": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m["a"] != int64(1) || m["b"] != 1.5 || m["e"] != "x" {
		t.Errorf("got %#v", m)
	}
	c := m["c"].([]any)
	if c[0] != int64(2) || c[1].(map[string]any)["d"] != int64(9007199254740991) {
		t.Errorf("nested = %#v", c)
	}
}
