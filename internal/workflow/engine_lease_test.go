package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

var guardKey = runstore.GuardKey(string(contract.ExecutionSyncCloudRun), org)

// leased is an engine whose runs hold their guard for lease and at most ten minutes in all (a
// budget of eight plus the margin), on fs.
func leased(fs *firestore.Client, clock *testenv.Clock, lease time.Duration, body workflow.Body) *workflow.Engine {
	return workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Guards: runstore.NewGuardStore(fs), GuardTTL: 10 * time.Minute,
		GuardLease: lease, Now: clock.Now, Log: logging.Discard()},
		workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear, Envelope: []string{"status", "completed_at", "failed_at", "failure_reason"}, Body: body})
}

func noop(context.Context, workflow.Run) (workflow.Result, error) { return workflow.Result{}, nil }

func startOn(eng *workflow.Engine, uuid string) (workflow.Outcome, error) {
	return eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerSchedule, RunUUID: uuid})
}

func getGuard(t *testing.T, fs *firestore.Client) *runstore.Guard {
	t.Helper()
	g, err := runstore.NewGuardStore(fs).Get(context.Background(), guardKey)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// noGuardLeft fails the test if the scope's guard is still held; what says of the guard why it
// should not be.
func noGuardLeft(t *testing.T, fs *firestore.Client, what string) {
	t.Helper()
	if g := getGuard(t, fs); g != nil {
		t.Errorf("guard %+v %s", g, what)
	}
}

// deadRunClosed fails the test unless the record of "dead-run" was closed as abandoned.
func deadRunClosed(t *testing.T, fs *firestore.Client) {
	t.Helper()
	rec, err := runstore.New(fs).GetRun(context.Background(), "dead-run")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed || rec.Failure == nil || rec.Failure.Reason != "run_abandoned" {
		t.Errorf("the dead run's record: %s %+v", rec.Status, rec.Failure)
	}
}

// seeGuard makes fault treat the guard document as seen, so that its first fault falls on the
// next document a commit writes first: the run record's end.
func seeGuard(t *testing.T, faulted *firestore.Client) {
	t.Helper()
	_ = faulted.RunTransaction(context.Background(), func(ctx context.Context, tx *firestore.Transaction) error {
		return tx.Delete(faulted.Collection(ledger.GuardsCollection).Doc(guardKey))
	})
}

// A run whose final write is lost — as when its process dies before it — leaves its record open
// and its guard held. The next run takes the scope over one lease after the run's last renewal,
// not after its budget and margin, and closes the record as abandoned.
func TestARunWhoseEndWasLostIsTakenOverOneLeaseLaterAndClosed(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	fault := fsfaulttest.Lost(codes.DeadlineExceeded, nil)
	faulted := fault.Client(t, fs)
	seeGuard(t, faulted)
	dying := leased(faulted, clock, 30*time.Second, noop)
	out, err := startOn(dying, "dead-run")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != workflow.StateFailed || out.Output["failure_reason"] != "record_failed" || out.Output["completed_at"] != nil {
		t.Fatalf("a run whose end was lost: %s %v", out.Status, out.Output)
	}
	if rec, _ := runstore.New(fs).GetRun(context.Background(), "dead-run"); rec.Status != workflow.StateReconciling {
		t.Fatalf("the record is %s, want it left reconciling", rec.Status)
	}
	g := getGuard(t, fs)
	if g == nil || g.WorkflowRunUUID != "dead-run" {
		t.Fatalf("guard %+v: want it left to the dead run, for the next run to close the record", g)
	}
	if !g.ExpiresAt.Equal(clock.Now().Add(30 * time.Second)) {
		t.Errorf("the guard expires at %s: want one 30 s lease, not the 10 min cap", g.ExpiresAt)
	}

	next := leased(fs, clock, 30*time.Second, noop)
	clock.Advance(29 * time.Second)
	if _, err := startOn(next, "next-run"); !errors.Is(err, runstore.ErrGuardHeld) {
		t.Fatalf("within the lease: %v, want the guard held", err)
	}
	clock.Advance(2 * time.Second)
	if out, err := startOn(next, "next-run"); err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("after the lease: %v %v", out.Status, err)
	}
	deadRunClosed(t, fs)
	noGuardLeft(t, fs, "outlived the run that took it over")
}

// A live run renews its lease while its body works: however far its lease's first term is
// passed, no other run takes its scope.
func TestALiveRunRenewingItsLeaseIsNotTakenOver(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	inside, release := make(chan struct{}), make(chan struct{})
	eng := leased(fs, clock, 300*time.Millisecond, func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
		if run.UUID == "live-run" {
			close(inside)
			<-release
		}
		return workflow.Result{}, nil
	})
	first := make(chan workflow.Outcome, 1)
	go func() { out, _ := startOn(eng, "live-run"); first <- out }()
	<-inside
	clock.Advance(time.Minute)
	// The next renewal, every 100 ms, extends the lease from the clock's new reading.
	deadline := time.Now().Add(5 * time.Second)
	for g := getGuard(t, fs); g == nil || !g.ExpiresAt.After(clock.Now()); g = getGuard(t, fs) {
		if time.Now().After(deadline) {
			t.Fatalf("guard %+v not renewed past %s", g, clock.Now())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := startOn(eng, "other-run"); !errors.Is(err, runstore.ErrGuardHeld) {
		t.Errorf("a run while the first renews its lease: %v, want the guard held", err)
	}
	close(release)
	if out := <-first; out.Status != workflow.StateCompleted {
		t.Errorf("the live run ended %s", out.Status)
	}
	noGuardLeft(t, fs, "outlived its run")
}

// A run that finds its guard taken by another stops: its body's context is cancelled and the
// run fails guard_lost.
func TestARunThatLostItsGuardStops(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	inside := make(chan struct{})
	eng := leased(fs, clock, 300*time.Millisecond, func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
		close(inside)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return workflow.Result{}, nil
	})
	first := make(chan workflow.Outcome, 1)
	go func() { out, _ := startOn(eng, "slow-run"); first <- out }()
	<-inside
	if _, err := fs.Collection(ledger.GuardsCollection).Doc(guardKey).Update(context.Background(), []firestore.Update{{Path: "workflow_run_uuid", Value: "taker"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-first:
		if out.Status != workflow.StateFailed || out.Output["failure_reason"] != "guard_lost" {
			t.Errorf("outcome %s %v, want failed guard_lost", out.Status, out.Output)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on working a scope it no longer holds")
	}
	if g := getGuard(t, fs); g == nil || g.WorkflowRunUUID != "taker" {
		t.Errorf("guard %+v: the taker's guard must be left alone", g)
	}
}

// The final write's commit lands and its answer is lost: the record, read back, says the run
// completed (and the guard went with it), so the run completed.
func TestAnEndWhoseAnswerWasLostIsReadBack(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	fault := fsfaulttest.New(codes.Unavailable)
	faulted := fault.Client(t, fs)
	seeGuard(t, faulted)
	before := fault.Faulted()
	out, err := startOn(leased(faulted, clock, 30*time.Second, noop), "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if fault.Faulted() != before+1 {
		t.Fatalf("%d commits faulted, want the end's", fault.Faulted()-before)
	}
	if out.Status != workflow.StateCompleted || out.Err != nil || out.Output["completed_at"] == nil || out.Output["failed_at"] != nil {
		t.Errorf("outcome %s %v %v, want completed", out.Status, out.Output, out.Err)
	}
	if rec, _ := runstore.New(fs).GetRun(context.Background(), "run-a"); rec.Status != workflow.StateCompleted {
		t.Errorf("record %s", rec.Status)
	}
	noGuardLeft(t, fs, "left")
}

// The start's commit lands and its answer is lost: the record and the guard, read back, are this
// run's, so it goes on; a redelivery of the same run uuid is still a duplicate.
func TestAStartWhoseAnswerWasLostIsReadBack(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	clock := testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 123456789, time.UTC))
	fault := fsfaulttest.New(codes.Unavailable)
	faulted := fault.Client(t, fs)
	ran := false
	eng := leased(faulted, clock, 30*time.Second, func(context.Context, workflow.Run) (workflow.Result, error) {
		ran = true
		return workflow.Result{}, nil
	})
	out, err := startOn(eng, "run-a")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	// Both commits are faulted: the start's (its first write is the guard) and the end's.
	if fault.Faulted() != 2 || !ran || out.Status != workflow.StateCompleted {
		t.Errorf("faulted %d, body ran %v, status %s", fault.Faulted(), ran, out.Status)
	}
	noGuardLeft(t, fs, "left")
	if _, err := startOn(eng, "run-a"); !errors.Is(err, workflow.ErrDuplicateRun) {
		t.Errorf("redelivery: %v, want a duplicate", err)
	}
}

// A start whose commit never landed is not started: the read-back finds no record.
func TestALostStartIsNotStarted(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	fault := fsfaulttest.Lost(codes.DeadlineExceeded, nil)
	ran := false
	eng := leased(fault.Client(t, fs), clock, 30*time.Second, func(context.Context, workflow.Run) (workflow.Result, error) {
		ran = true
		return workflow.Result{}, nil
	})
	if _, err := startOn(eng, "run-a"); err == nil || ran {
		t.Fatalf("a lost start: err %v, body ran %v", err, ran)
	}
	if _, err := runstore.New(fs).GetRun(context.Background(), "run-a"); status.Code(err) != codes.NotFound {
		t.Errorf("record: %v, want none", err)
	}
}

// Renewal never takes a run's guard past its cap (GuardTTL from when it took it, the budget and
// margin): a run that overruns that loses its scope as a dead one would.
func TestRenewalStopsAtTheCap(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	acquired := clock.Now()
	inside, release := make(chan struct{}), make(chan struct{})
	eng := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Guards: runstore.NewGuardStore(fs), GuardTTL: time.Minute,
		GuardLease: 300 * time.Millisecond, Now: clock.Now, Log: logging.Discard()},
		workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear, Body: func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
			close(inside)
			<-release
			return workflow.Result{}, nil
		}})
	done := make(chan struct{})
	go func() { _, _ = startOn(eng, "long-run"); close(done) }()
	<-inside
	defer func() { close(release); <-done }()
	renewedPast := func(at time.Time) *runstore.Guard {
		deadline := time.Now().Add(5 * time.Second)
		for g := getGuard(t, fs); ; g = getGuard(t, fs) {
			if g != nil && g.ExpiresAt.After(at) {
				return g
			}
			if time.Now().After(deadline) {
				return g
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	clock.Advance(50 * time.Second)
	if g := renewedPast(clock.Now()); g == nil || !g.ExpiresAt.After(clock.Now()) {
		t.Fatalf("guard %+v not renewed within the cap", g)
	}
	clock.Advance(20 * time.Second)
	if g := renewedPast(acquired.Add(time.Minute)); g == nil || g.ExpiresAt.After(acquired.Add(time.Minute)) {
		t.Errorf("guard %+v renewed past its cap %s", g, acquired.Add(time.Minute))
	}
}

// A start that took over a dead run's guard and whose answer was lost still closes the dead
// run's record: the guard it wrote names the run it took over.
func TestAStartWhoseAnswerWasLostStillClosesTheRunItTookOver(t *testing.T) {
	t.Parallel()
	fs, clock := testenv.Firestore(t), testenv.NewClock(epoch)
	dead := runstore.RunRecord{WorkflowRunUUID: "dead-run", WorkflowType: string(contract.ExecutionSyncCloudRun), Status: "reconciling",
		InitiatedAt: clock.Now(), UpdatedAt: clock.Now()}
	if _, err := runstore.New(fs).StartRun(context.Background(), dead, &runstore.GuardClaim{Key: guardKey,
		Guard: runstore.Guard{WorkflowRunUUID: "dead-run", AcquiredAt: clock.Now()}, TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	fault := fsfaulttest.New(codes.Unavailable)
	out, err := startOn(leased(fault.Client(t, fs), clock, 30*time.Second, noop), "next-run")
	if err != nil || out.Status != workflow.StateCompleted || fault.Faulted() == 0 {
		t.Fatalf("start: %v %v, %d faulted", out.Status, err, fault.Faulted())
	}
	deadRunClosed(t, fs)
}
