package executortest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// runWorkflow holds the execution-sync workflow over the adapter to the contract, fault by fault.
func runWorkflow(t *testing.T, h Harness) {
	t.Run("TransientErrorsSettleNothingOnTheErroredRowAndEveryRowWithinFiveRuns", func(t *testing.T) { transient(t, h) })
	t.Run("ResourceExhaustedBeginsNoSyncAfterItAndDefersTheRest", func(t *testing.T) { exhaustedStops(t, h) })
	t.Run("NotFoundIsUnknownUntilTheGraceAndOnlyThenLost", func(t *testing.T) { notFound(t, h) })
	t.Run("ARefusalSettlesNothingAndTheRunRecordSaysWhy", func(t *testing.T) { refusal(t, h) })
	t.Run("CallsSlowerThanTheirTimeoutAreErroredDeadlineExceededAndSettleNothing", func(t *testing.T) { timeouts(t, h) })
	t.Run("ABlindTargetsRowsAreUnknownUnderThatTarget", func(t *testing.T) { blindTarget(t, h) })
}

// Unavailable and DeadlineExceeded on 30% of the calls: a sync whose call failed settles nothing
// and writes only the error it records (sync.last_error, sync.last_error_at, sync.attempts + 1);
// every row is settled, once, within five runs.
func transient(t *testing.T, h Harness) {
	t.Parallel()
	// A row errors with Unavailable only when all the adapter's attempts fail (0.3³, about 2.7% of
	// rows with three), so the Unavailable case takes the most rows a run syncs (limit 200) to
	// have errored rows at all; the test fails if it has none. Five runs are enough for each
	// harness's seeded pattern; in general a row fails five runs running with probability 0.3⁵
	// (0.24%) when its failures are not retried, so the bound is the pattern's, not a certainty.
	// What the code guarantees — an errored row stays a candidate of the next run — is checked on
	// every run.
	tests := []struct {
		name  string
		codes []codes.Code
		rows  int
	}{
		{"Unavailable, after the adapter's attempts", []codes.Code{codes.Unavailable}, 200},
		{"DeadlineExceeded, never retried", []codes.Code{codes.DeadlineExceeded}, 60},
		{"Unavailable and DeadlineExceeded mixed", []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One sync at a time, so the fake's seeded draws fall on the same calls in every run of
			// the test: the fault pattern, and so every count below, is reproducible.
			w := newWorld(t, h, worldOptions{concurrency: 1})
			runs := newTransientRuns(tt.codes, w.seed(tt.rows, Succeeded), w.get)
			calls := w.fake.Calls()
			w.fake.Flaky(0.3, tt.codes)
			for run := 1; run <= 5 && !runs.Done(); run++ {
				w.clock.Advance(time.Minute) // each run's writes carry its own time
				now := w.clock.Now()
				out, o, s := w.start()
				runs.Check(t, run, out, o, s, now)
			}

			// The faults happened: rows errored, with each code the case injects. Unavailable is
			// retried, so it shows as more calls than observations; a row errors with it only when
			// every attempt failed, which the Unavailable-only case must see.
			runs.Faulted(t)
			observes, _, _ := w.spy.counts()
			calls = w.fake.Calls() - calls
			if retried := slices.Contains(tt.codes, codes.Unavailable); retried != (calls > observes) {
				t.Errorf("%d calls for %d observations: the adapter should retry Unavailable only", calls, observes)
			}
			runs.Finish(t)
			for id, n := range w.settlementWrites() {
				if n != 1 {
					t.Errorf("row %s has %d settlement writes, want 1", id, n)
				}
			}
		})
	}
}

// ResourceExhausted: once it has reached the run, no sync begins — no new executor call is made
// — for the rest of the run. The syncs already in flight (at most Concurrency − 1) run to their
// end and settle what they were told; every row not begun is deferred, counted, and left
// untouched for the next run. The error's own write on its row is slowed down (Firestore
// latency), so a stop that waited for that write would show as further calls.
func exhaustedStops(t *testing.T, h Harness) {
	t.Parallel()
	const rows, failAt = 40, 6
	for _, concurrency := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, h, worldOptions{concurrency: concurrency, dial: []grpc.DialOption{slowErrorWrites(300 * time.Millisecond)}})
			seeded := w.seed(rows, Succeeded)
			calls := w.fake.Calls()
			w.spy.throttleAt(failAt)

			out, o, s := w.start()
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run ended %s: %v; throttling is not a failure", out.Status, out.Err)
			}
			begun, after, exhausted := w.spy.counts()
			if exhausted != 1 {
				t.Fatalf("%d calls came back ResourceExhausted, want the 1 injected", exhausted)
			}
			if after > concurrency-1 {
				t.Errorf("%d syncs reached the executor after the ResourceExhausted, want at most %d (those already in flight)", after, concurrency-1)
			}
			if concurrency == 1 && begun != failAt {
				t.Errorf("one worker made %d calls, want %d: none after the ResourceExhausted", begun, failAt)
			}
			if n := w.fake.Calls() - calls; n != begun {
				t.Errorf("calls = %d, want %d (one per sync begun)", n, begun)
			}
			exhaustedRun(t, seeded, w.get, o, s, begun, w.clock.Now())

			// Deferred, not dropped: the next run settles every row left.
			_, _, s = w.start()
			if s.Settled["succeeded"] != rows-begun+1 || s.StoppedBy != "" {
				t.Errorf("the next run: %+v, want the %d rows left settled", s, rows-begun+1)
			}
		})
	}
}

// NotFound is unknown, never an outcome: the row keeps its status and observed_at, records when
// the executor stopped knowing the execution, and is settled lost (status failed, outcome lost)
// only once it has stayed unknown for the grace — at exactly the grace, or any time after.
func notFound(t *testing.T, h Harness) {
	t.Parallel()
	const grace = 15 * time.Minute
	tests := []struct {
		name  string
		after time.Duration // from the first run that found it unknown
		lost  bool
	}{
		{"unknown for less than the grace: still unknown, status untouched", grace - time.Microsecond, false},
		{"unknown for exactly the grace: lost", grace, true},
		{"unknown past the grace: lost", grace + time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, h, worldOptions{grace: grace})
			seeded := w.seed(1, Running)
			id := slices.Collect(maps.Keys(seeded))[0]
			want := seeded[id]
			w.fake.Forget(want.ProviderRef) // aged out, deleted
			calls := w.fake.Calls()
			since := w.clock.Now()

			_, _, s := w.start()
			if s.Unknown != 1 || len(s.Settled) != 0 || s.Errored != 0 {
				t.Fatalf("first run stats = %+v, want one unknown", s)
			}
			unknown(t, want, w.get(id), since, since, 1)

			w.clock.Advance(tt.after)
			now := w.clock.Now()
			out, _, s := w.start()
			if n := w.fake.Calls() - calls; n != 2 {
				t.Errorf("calls = %d, want 2 (one a run; NotFound is not retried)", n)
			}
			got := w.get(id)
			if !tt.lost {
				if s.Unknown != 1 || len(s.Settled) != 0 {
					t.Errorf("second run stats = %+v, want one unknown, nothing settled", s)
				}
				// It learned nothing new: the row is not written again (last synced, and one
				// attempt, at the first sighting).
				unknown(t, want, got, since, since, 1)
				return
			}
			if s.Unknown != 0 || !reflect.DeepEqual(s.Settled, map[string]int{ledger.OutcomeLost: 1}) {
				t.Errorf("second run stats = %+v, want one settled lost and nothing else", s)
			}
			lost(t, want, got, since, now, out.RunUUID, grace)
			if err := w.fake.UnknownEvidence(want.ProviderRef, got.Settlement.Evidence); err != nil {
				t.Errorf("lost evidence: %v", err)
			}
		})
	}
}

// PermissionDenied (and Unauthenticated): nothing settled, executor calls stop, the run fails
// and its record says why.
func refusal(t *testing.T, h Harness) {
	t.Parallel()
	tests := []struct {
		code   codes.Code
		reason string
	}{
		{codes.PermissionDenied, "permission_denied"},
		{codes.Unauthenticated, "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			t.Parallel()
			const rows, concurrency = 12, 4
			w := newWorld(t, h, worldOptions{concurrency: concurrency})
			seeded := w.seed(rows, Succeeded)
			calls := w.fake.Calls()
			w.fake.FailAll(tt.code) // access is denied for every execution

			out, o, s := w.start()
			refused(t, w.runs, seeded, w.get, out, o, s, tt.code, tt.reason, concurrency, w.clock.Now())
			if n := w.fake.Calls() - calls; n != s.Errored {
				t.Errorf("calls = %d, want %d: one per errored row, none after the stop", n, s.Errored)
			}
			if n := len(w.settlementWrites()); n != 0 {
				t.Errorf("%d rows have settlement writes", n)
			}
		})
	}
}

// A call slower than the adapter's per-call timeout is cut at the timeout: the row is errored
// with DeadlineExceeded in the run's stats, and nothing is settled. A call answered within its
// timeout settles as usual, so the timeout is what makes the difference.
func timeouts(t *testing.T, h Harness) {
	t.Parallel()
	tests := []struct {
		name             string
		timeout, latency time.Duration
		cut              bool
	}{
		{"latency beyond the per-call timeout", 50 * time.Millisecond, time.Minute, true},
		{"latency within the per-call timeout", 10 * time.Second, 20 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const rows = 8
			w := newWorld(t, h, worldOptions{concurrency: 4, limits: Limits{CallTimeout: tt.timeout}})
			seeded := w.seed(rows, Succeeded)
			calls := w.fake.Calls()
			w.fake.Delay(tt.latency)

			out, o, s := w.start()
			// Every call cut: the run reached the executor for no row, and fails saying so.
			if want := map[bool]string{true: workflow.StateFailed, false: workflow.StateCompleted}[tt.cut]; out.Status != want {
				t.Fatalf("run ended %s: %v; want %s", out.Status, out.Err, want)
			}
			if tt.cut && out.Output["failure_reason"] != executionsync.ReasonExecutorUnreachable {
				t.Errorf("failure_reason = %v, want %s", out.Output["failure_reason"], executionsync.ReasonExecutorUnreachable)
			}
			if n := w.fake.Calls() - calls; n != rows {
				t.Errorf("calls = %d, want %d (DeadlineExceeded is not retried)", n, rows)
			}
			if s.Deferred != 0 || s.OutOfBudget {
				t.Errorf("stats = %+v: the run's budget is not what cut the calls", s)
			}
			if !tt.cut {
				if s.Settled["succeeded"] != rows || s.Errored != 0 || w.fake.Cut() != 0 {
					t.Errorf("stats = %+v, %d calls cut; want every row settled", s, w.fake.Cut())
				}
				return
			}
			if n := w.fake.Cut(); n != rows {
				t.Errorf("%d calls ran to their deadline, want %d", n, rows)
			}
			allTimedOut(t, seeded, w.get, o, s, w.clock.Now())
		})
	}
}

// Every execution of one target is NotFound: each of its rows is unknown, not an error, and
// records that one target as the one that answered — what the blind-executor guard judges.
func blindTarget(t *testing.T, h Harness) {
	t.Parallel()
	w := newWorld(t, h, worldOptions{})
	seeded := w.seed(5, Running)
	target := ""
	for _, r := range seeded {
		w.fake.Forget(r.ProviderRef)
		target = w.fake.Executor().Target(r.ProviderRef)
	}
	since := w.clock.Now()
	_, _, s := w.start()
	if s.Unknown != len(seeded) || s.Errored != 0 || len(s.Settled) != 0 {
		t.Errorf("stats = %+v, want every row unknown", s)
	}
	for id, want := range seeded {
		got := w.get(id)
		unknown(t, want, got, since, since, 1)
		if got.Sync.Target != target || got.Sync.LastVerdict != string(executor.VerdictUnknown) {
			t.Errorf("row %s: sync target %q verdict %q, want unknown under %q", id, got.Sync.Target, got.Sync.LastVerdict, target)
		}
	}
}
