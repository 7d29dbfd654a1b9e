package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const org = "0f8fad5b-d9cb-469f-a165-70867728950e"

// epoch is where the tests' clocks start.
var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

var validInput = json.RawMessage(`{"organization_uuid": "` + org + `"}`)

type fixture struct {
	runs  *runstore.Store
	spy   *fsspy.Spy
	clock *testenv.Clock
}

func newFixture(t *testing.T) fixture {
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	return fixture{runs: runstore.New(fs), spy: spy, clock: testenv.NewClock(epoch)}
}

func (f fixture) engine(states []workflow.State, envelope []string, body workflow.Body) *workflow.Engine {
	return workflow.NewEngine(workflow.Options{Runs: f.runs, Now: f.clock.Now, Log: logging.Discard()}, workflow.Definition{
		Declaration: executionsync.CloudRun.Declaration, States: states, Envelope: envelope, Body: body,
	})
}

func (f fixture) history(t *testing.T, uuid string) (runstore.RunRecord, []string) {
	t.Helper()
	rec, err := f.runs.GetRun(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, h := range rec.History {
		states = append(states, h.State)
	}
	return rec, states
}

func TestLinearRunWalksItsStatesAndRunsTheBodyInReconciling(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var bodyState string
	eng := f.engine(workflow.Linear, []string{"completed_at", "failed_at"}, func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
		rec, err := f.runs.GetRun(ctx, run.UUID)
		if err != nil {
			return workflow.Result{}, err
		}
		bodyState = rec.Status
		f.clock.Advance(time.Second)
		return workflow.Result{Output: map[string]any{"n": 7}, Stats: map[string]any{"raced": 2}}, nil
	})
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerManual, Actor: "ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if bodyState != "reconciling" {
		t.Errorf("body ran in state %q, want reconciling", bodyState)
	}
	if out.Status != "completed" || out.Output["n"] != int64(7) || out.Output["completed_at"] != "2026-11-29T09:00:01Z" {
		t.Errorf("outcome = %+v", out)
	}
	if _, ok := out.Output["failed_at"]; ok {
		t.Error("a completed run's output carries failed_at")
	}
	rec, states := f.history(t, out.RunUUID)
	if !slices.Equal(states, []string{"initiated", "reconciling", "completed"}) || rec.Trigger != "manual" || rec.Actor != "ops@example.com" {
		t.Errorf("record: states %v trigger %s actor %s", states, rec.Trigger, rec.Actor)
	}
	if rec.Stats["raced"] != int64(2) || rec.Output["n"] != int64(7) || rec.InitialData["organization_uuid"] != org {
		t.Errorf("record: stats %v output %v initial data %v", rec.Stats, rec.Output, rec.InitialData)
	}
}

func TestAtomicRunGoesFromPendingToCompleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var bodyState string
	eng := f.engine(workflow.Atomic, []string{"status", "workflow_run_uuid", "initiated_at"}, func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
		rec, _ := f.runs.GetRun(ctx, run.UUID)
		bodyState = rec.Status
		return workflow.Result{}, nil
	})
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerSchedule})
	if err != nil {
		t.Fatal(err)
	}
	_, states := f.history(t, out.RunUUID)
	if bodyState != "pending" || !slices.Equal(states, []string{"pending", "completed"}) {
		t.Errorf("body in %q, states %v", bodyState, states)
	}
	if out.Output["status"] != "completed" || out.Output["workflow_run_uuid"] != out.RunUUID || out.Output["initiated_at"] == nil {
		t.Errorf("envelope fields = %v", out.Output)
	}
}

func TestFailedRunRecordsTheFailureFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cause := status.Error(codes.Unavailable, "firestore unavailable")
	eng := f.engine(workflow.Linear, []string{"failed_at", "completed_at", "failure_reason", "failure_type", "failed_step", "failed_layer",
		"failed_at_state", "failed_action", "error", "error_type"}, func(context.Context, workflow.Run) (workflow.Result, error) {
		return workflow.Result{Output: map[string]any{"candidate_count": 3}},
			&workflow.StepError{Step: "scan", Layer: "firestore", Reason: "scan_failed", Err: cause}
	})
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerLocal})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"failure_reason": "scan_failed", "failure_type": "transient", "failed_step": "scan", "failed_layer": "firestore",
		"failed_at_state": "reconciling", "failed_action": "complete", "error_type": "Unavailable", "candidate_count": int64(3),
		"failed_at": "2026-11-29T09:00:00Z",
	}
	for k, v := range want {
		if out.Output[k] != v {
			t.Errorf("output[%s] = %v, want %v", k, out.Output[k], v)
		}
	}
	if out.Status != "failed" || !errors.Is(out.Err, cause) {
		t.Errorf("status %s err %v", out.Status, out.Err)
	}
	if _, ok := out.Output["completed_at"]; ok {
		t.Error("a failed run's output carries completed_at")
	}
	rec, states := f.history(t, out.RunUUID)
	if rec.Failure == nil || rec.Failure.Reason != "scan_failed" || rec.FailedAt.IsZero() || !slices.Equal(states, []string{"initiated", "reconciling", "failed"}) {
		t.Errorf("record = %+v, states %v", rec, states)
	}
}

func TestEnvelopeAddsOnlyTheFieldsTheSeedLists(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	eng := f.engine(workflow.Linear, nil, func(context.Context, workflow.Run) (workflow.Result, error) {
		return workflow.Result{Output: map[string]any{"swept": 0}}, errors.New("boom")
	})
	out, _ := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput})
	if len(out.Output) != 1 || out.Output["swept"] != int64(0) {
		t.Errorf("output = %v, want only the body's fields", out.Output)
	}
}

func TestPanickingBodyFailsTheRunInsteadOfTheProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	eng := f.engine(workflow.Linear, []string{"failure_reason", "error"}, func(context.Context, workflow.Run) (workflow.Result, error) {
		var m map[string]int
		m["x"] = 1 //nolint:staticcheck // SA5000 on purpose: the body panics as a runtime error
		return workflow.Result{}, nil
	})
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "failed" || out.Output["failure_reason"] != "panic" {
		t.Errorf("outcome = %+v", out)
	}
	if rec, _ := f.history(t, out.RunUUID); rec.Status != "failed" {
		t.Errorf("record left in %s", rec.Status)
	}
}

func TestRecordIsFinishedEvenWhenTheCallerContextEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	eng := f.engine(workflow.Linear, nil, func(ctx context.Context, _ workflow.Run) (workflow.Result, error) {
		cancel()
		<-ctx.Done()
		return workflow.Result{}, ctx.Err()
	})
	out, err := eng.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := f.history(t, out.RunUUID)
	if rec.Status != "failed" || rec.Failure.ErrorType != "Canceled" {
		t.Errorf("record = status %s failure %+v", rec.Status, rec.Failure)
	}
}

func TestInvalidRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ran := false
	eng := f.engine(workflow.Linear, nil, func(context.Context, workflow.Run) (workflow.Result, error) {
		ran = true
		return workflow.Result{}, nil
	})
	for _, req := range []workflow.Request{
		{Type: "runner.unknown", InitialData: validInput},
		{Type: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{"organization_uuid": "nope"}`)},
		{Type: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{}`)},
		{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: "__reserved__"},
		{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: "a/b"},
		{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: ".."},
	} {
		if _, err := eng.Start(context.Background(), req); !workflow.IsValidation(err) {
			t.Errorf("%s %s: err = %v, want a validation error", req.Type, req.InitialData, err)
		}
	}
	if ran || f.spy.Commits() != 0 {
		t.Errorf("body ran %t, commits %d", ran, f.spy.Commits())
	}
}

func TestAGivenRunUUIDIsUsedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	runs := 0
	eng := f.engine(workflow.Linear, nil, func(context.Context, workflow.Run) (workflow.Result, error) {
		runs++
		return workflow.Result{}, nil
	})
	req := workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: "fixed-run"}
	if _, err := eng.Start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Start(context.Background(), req); !errors.Is(err, workflow.ErrDuplicateRun) || contract.CodeOf(err) != contract.CodeConflict {
		t.Errorf("second start with the same uuid: %v, want a conflict wrapping ErrDuplicateRun", err)
	}
	if runs != 1 {
		t.Errorf("body ran %d times", runs)
	}
}

func TestErrorTypeAndTransience(t *testing.T) {
	for _, c := range []struct {
		err       error
		typ       string
		transient bool
	}{
		{status.Error(codes.Unavailable, "x"), "Unavailable", true},
		{status.Error(codes.PermissionDenied, "x"), "PermissionDenied", false},
		{context.DeadlineExceeded, "DeadlineExceeded", true},
		{context.Canceled, "Canceled", false},
		{&workflow.StepError{Err: errors.New("plain")}, "*errors.errorString", false},
	} {
		if got := workflow.ErrorType(c.err); got != c.typ {
			t.Errorf("ErrorType(%v) = %s, want %s", c.err, got, c.typ)
		}
		if got := workflow.Transient(c.err); got != c.transient {
			t.Errorf("Transient(%v) = %t", c.err, got)
		}
	}
}

func (f fixture) guarded(t *testing.T, fs *firestore.Client, body workflow.Body) *workflow.Engine {
	return workflow.NewEngine(workflow.Options{Runs: f.runs, Guards: runstore.NewGuardStore(fs), GuardTTL: time.Minute, Now: f.clock.Now, Log: logging.Discard()},
		workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear, Body: body})
}

// A run is the cheapest part of every sweep a tick fans out: one transaction starts it (guard
// and record together) and one ends it (record and guard release together).
func TestAGuardedRunCostsTwoCommits(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	f := fixture{runs: runstore.New(fs), spy: spy, clock: testenv.NewClock(epoch)}
	eng := f.guarded(t, fs, func(ctx context.Context, run workflow.Run) (workflow.Result, error) { return workflow.Result{}, nil })
	spy.Reset()
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerSchedule, RunUUID: "run-a"})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("run: %v %v", out.Status, err)
	}
	writes := map[string]int{}
	for _, w := range spy.Writes() {
		writes[strings.SplitN(w.Document, "/documents/", 2)[1]]++
	}
	want := map[string]int{"sweep_runs/run-a": 2, "sweep_guards/" + runstore.GuardKey(string(contract.ExecutionSyncCloudRun), org): 2}
	if c := spy.Commits(); c != 2 || !maps.Equal(writes, want) {
		t.Errorf("%d commits writing %v; want 2 writing %v", c, writes, want)
	}
	if r := spy.Reads(); len(r) > 2 {
		t.Errorf("read %d documents: %v; want the guard (none at the start) and the record and guard at the end", len(r), r)
	}
	if _, states := f.history(t, "run-a"); !slices.Equal(states, []string{"initiated", "reconciling", "completed"}) {
		t.Errorf("history %v", states)
	}
}

func TestAGuardKeepsTwoRunsOfOneScopeApart(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	f := fixture{runs: runstore.New(fs), spy: spy, clock: testenv.NewClock(epoch)}
	inside := make(chan struct{})
	release := make(chan struct{})
	eng := f.guarded(t, fs, func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
		if run.Trigger == workflow.TriggerSchedule {
			close(inside)
			<-release
		}
		return workflow.Result{}, nil
	})
	first := make(chan workflow.Outcome, 1)
	go func() {
		out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerSchedule, RunUUID: "run-a"})
		if err != nil {
			t.Error(err)
		}
		first <- out
	}()
	<-inside

	// Another run on the same scope is refused with conflict, naming the holder.
	_, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerManual})
	var ce *contract.Error
	if !errors.As(err, &ce) || ce.Code != contract.CodeConflict || !errors.Is(err, runstore.ErrGuardHeld) {
		t.Fatalf("overlapping run: err = %v, want conflict", err)
	}
	if d, _ := ce.Details.(map[string]any); d["workflow_run_uuid"] != "run-a" {
		t.Errorf("conflict details = %v", ce.Details)
	}
	// The same run delivered again while it runs is a duplicate.
	_, err = eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: "run-a"})
	if !errors.Is(err, workflow.ErrDuplicateRun) {
		t.Errorf("redelivery during the run: err = %v, want ErrDuplicateRun", err)
	}
	// Another scope is free.
	other := json.RawMessage(`{"organization_uuid": "1f8fad5b-d9cb-469f-a165-70867728950e"}`)
	if out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: other}); err != nil || out.Status != "completed" {
		t.Errorf("another scope: %v %v", out.Status, err)
	}
	close(release)
	if out := <-first; out.Status != "completed" {
		t.Errorf("first run ended %s", out.Status)
	}
	// After it ends, the scope is free again, and the same run uuid is still a duplicate.
	if _, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, RunUUID: "run-a"}); !errors.Is(err, workflow.ErrDuplicateRun) {
		t.Errorf("redelivery after the run: err = %v, want ErrDuplicateRun", err)
	}
	if out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput}); err != nil || out.Status != "completed" {
		t.Errorf("a later run: %v %v", out.Status, err)
	}
	if _, err := fs.Collection(ledger.GuardsCollection).Doc(runstore.GuardKey(string(contract.ExecutionSyncCloudRun), org)).Get(context.Background()); status.Code(err) != codes.NotFound {
		t.Errorf("the guard outlived its runs: %v", err)
	}
}

func TestAnExpiredGuardIsTakenOverAndItsRunClosed(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	f := fixture{runs: runstore.New(fs), clock: testenv.NewClock(epoch)}
	ctx := context.Background()
	// A run that died mid-way: its record is reconciling and its guard is still there.
	dead := runstore.RunRecord{WorkflowRunUUID: "dead-run", WorkflowType: string(contract.ExecutionSyncCloudRun), Status: "reconciling",
		InitiatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
	if _, err := f.runs.StartRun(ctx, dead, &runstore.GuardClaim{Key: runstore.GuardKey(string(contract.ExecutionSyncCloudRun), org),
		Guard: runstore.Guard{WorkflowRunUUID: "dead-run", AcquiredAt: f.clock.Now()}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	eng := f.guarded(t, fs, func(context.Context, workflow.Run) (workflow.Result, error) { return workflow.Result{}, nil })
	if _, err := eng.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput}); !errors.Is(err, runstore.ErrGuardHeld) {
		t.Fatalf("before expiry: %v, want the guard held", err)
	}
	f.clock.Advance(2 * time.Minute)
	out, err := eng.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput})
	if err != nil || out.Status != "completed" {
		t.Fatalf("after expiry: %v %v", out.Status, err)
	}
	rec, err := f.runs.GetRun(ctx, "dead-run")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "failed" || rec.Failure == nil || rec.Failure.Reason != "run_abandoned" {
		t.Errorf("the dead run's record = %s %+v", rec.Status, rec.Failure)
	}
}

// orgs is an in-memory Organizations: which organizations have sweeps enabled.
type orgs map[string]bool

func (o orgs) Enabled(_ context.Context, org string) (bool, error) { return o[org], nil }

// An organization that opted out is refused before anything is written, on every trigger, and
// only the command may ask to include it; the run it then starts says so in its record.
func TestAnOrganizationThatOptedOutIsRefusedUnlessTheCommandIncludesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ran := 0
	eng := workflow.NewEngine(workflow.Options{Runs: f.runs, Orgs: orgs{}, Now: f.clock.Now, Log: logging.Discard()}, workflow.Definition{
		Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear,
		Body: func(_ context.Context, run workflow.Run) (workflow.Result, error) {
			if !run.Overrides.OptOut {
				t.Error("the body of an included organization's run was not told so")
			}
			ran++
			return workflow.Result{}, nil
		},
	})
	for _, trig := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual, workflow.TriggerLocal} {
		_, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: trig})
		if contract.CodeOf(err) != contract.CodeForbidden || !errors.Is(err, workflow.ErrOrganizationDisabled) {
			t.Errorf("%s: err = %v, want forbidden: the organization opted out", trig, err)
		}
		if trig == workflow.TriggerLocal {
			continue
		}
		_, err = eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: trig, Overrides: workflow.Overrides{OptOut: true}})
		if contract.CodeOf(err) != contract.CodeForbidden {
			t.Errorf("%s asking to include it: err = %v, want forbidden", trig, err)
		}
	}
	if ran != 0 || f.spy.Commits() != 0 {
		t.Fatalf("refused runs ran %d bodies and committed %d times", ran, f.spy.Commits())
	}
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput,
		Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{OptOut: true}, Actor: "local:ops@host", ClaimedActor: "someone"})
	if err != nil || out.Status != workflow.StateCompleted || ran != 1 {
		t.Fatalf("the command including it: %v %+v", err, out)
	}
	if rec, _ := f.history(t, out.RunUUID); !rec.IncludeDisabled || rec.Actor != "local:ops@host" || rec.ClaimedActor != "someone" {
		t.Errorf("record: include_disabled %t actor %q claimed_actor %q", rec.IncludeDisabled, rec.Actor, rec.ClaimedActor)
	}
}
