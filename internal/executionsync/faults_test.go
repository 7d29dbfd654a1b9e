package executionsync_test

// Executor faults (issue 10, item 1) through the Cloud Run fake: what the execution-sync workflow
// guarantees when Cloud Run fails, throttles, forgets, refuses or stalls. The Kubernetes
// equivalents are in internal/kubejobs/faults_test.go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executionsync/synccheck"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// a. Unavailable and DeadlineExceeded on 30% of the calls: a sync whose call failed settles
// nothing and writes only the error it records (sync.last_error, sync.last_error_at,
// sync.attempts + 1); every row is settled within five runs.
func TestTransientCallErrorsSettleNothingOnTheErroredRowAndEveryRowWithinFiveRuns(t *testing.T) {
	t.Parallel()
	// A row errors with Unavailable only when all three of the adapter's attempts fail (0.3³, about
	// 2.7% of rows), so the Unavailable case takes the most rows a run syncs (limit 200) to have
	// errored rows at all; the test fails if it has none. Five runs are enough for this seeded
	// pattern; in general a row fails five runs running with probability 0.3⁵ (0.24%) when its
	// failures are not retried, so the bound is the pattern's, not a certainty. What the code
	// guarantees — an errored row stays a candidate of the next run — is checked on every run.
	tests := []struct {
		name  string
		codes []codes.Code
		rows  int
	}{
		{"Unavailable, after the adapter's three attempts", []codes.Code{codes.Unavailable}, 200},
		{"DeadlineExceeded, never retried", []codes.Code{codes.DeadlineExceeded}, 60},
		{"Unavailable and DeadlineExceeded mixed", []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var picker *faultCodePicker
			// One sync at a time, so the fake's seeded draws fall on the same calls in every run of
			// the test: the fault pattern, and so every count below, is reproducible.
			e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 1}, wrap: func(x executionsync.Executor) executionsync.Executor {
				picker = &faultCodePicker{Executor: x, codes: tt.codes, rate: 0.3, rng: rand.New(rand.NewPCG(10, 1))}
				return picker
			}})
			picker.fake = e.fake
			runs := synccheck.NewTransientRuns(tt.codes, faultSeed(e, tt.rows, succeeded), e.get)
			for run := 1; run <= 5 && !runs.Done(); run++ {
				e.clock.Advance(time.Minute) // each run's writes carry its own time
				now := e.clock.Now()
				out := e.start(map[string]any{"limit": 200})
				o, s := outputOf(t, out)
				runs.Check(t, run, out, o, s, now)
			}

			// The faults happened: rows errored, with each code the case injects. Unavailable is
			// retried, so it shows as more calls than observations; a row errors with it only when
			// every attempt failed, which the Unavailable-only case must see.
			runs.Faulted(t)
			observes, calls := picker.observed(), e.fake.Calls(cloudrunfake.GetExecution)
			if retried := slices.Contains(tt.codes, codes.Unavailable); retried != (calls > observes) {
				t.Errorf("%d Cloud Run calls for %d observations: the adapter should retry Unavailable only", calls, observes)
			}
			runs.Finish(t)

			// Every row settled, once.
			for id, n := range e.executionWrites("settlement") {
				if n != 1 {
					t.Errorf("row %s has %d settlement writes, want 1", id, n)
				}
			}
		})
	}
}

// b. ResourceExhausted: once it has reached the run, no sync begins — no new executor call is
// made — for the rest of the run. The syncs already in flight (at most Concurrency − 1) run to
// their end and settle what they were told; every row not begun is deferred, counted, and left
// untouched for the next run. The error's own write on its row is slowed down here (Firestore
// latency), so a stop that waited for that write would show as further calls.
func TestResourceExhaustedBeginsNoSyncAfterItAndDefersTheRest(t *testing.T) {
	t.Parallel()
	const rows, failAt = 40, 6
	for _, concurrency := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) {
			t.Parallel()
			var spy *faultStopSpy
			e := newEnv(t, options{cfg: executionsync.Config{Concurrency: concurrency}, wrap: func(x executionsync.Executor) executionsync.Executor {
				spy = &faultStopSpy{Executor: x, failAt: failAt}
				return spy
			}, dial: []grpc.DialOption{synccheck.SlowErrorWrites(300 * time.Millisecond)}})
			spy.fake = e.fake
			seeded := faultSeed(e, rows, succeeded)

			out := e.start(map[string]any{"limit": 200})
			o, s := outputOf(t, out)
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run ended %s: %v; quota pressure is not a failure", out.Status, out.Err)
			}
			begun, after, exhausted := spy.counts()
			if exhausted != 1 {
				t.Fatalf("%d calls came back ResourceExhausted, want the 1 injected", exhausted)
			}
			if after > concurrency-1 {
				t.Errorf("%d syncs reached Cloud Run after the ResourceExhausted, want at most %d (those already in flight)", after, concurrency-1)
			}
			if concurrency == 1 && begun != failAt {
				t.Errorf("one worker made %d calls, want %d: none after the ResourceExhausted", begun, failAt)
			}
			if calls := e.fake.Calls(cloudrunfake.GetExecution); calls != begun {
				t.Errorf("Cloud Run calls = %d, want %d (one per sync begun)", calls, begun)
			}
			synccheck.Exhausted(t, seeded, e.get, o, s, begun, e.clock.Now())

			// Deferred, not dropped: the next run settles every row left.
			_, s = outputOf(t, e.start(map[string]any{"limit": 200}))
			if s.Settled["succeeded"] != rows-begun+1 || s.StoppedBy != "" {
				t.Errorf("the next run: %+v, want the %d rows left settled", s, rows-begun+1)
			}
		})
	}
}

// c. NotFound is unknown, never an outcome: the row keeps its status and observed_at, records
// when Cloud Run stopped knowing the execution, and is settled lost (status failed, outcome
// lost) only once it has stayed unknown for the grace — at exactly the grace, or any time after.
func TestNotFoundIsUnknownUntilTheGraceAndOnlyThenLost(t *testing.T) {
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
			e := newEnv(t, options{cfg: executionsync.Config{LostGrace: grace}})
			id := e.stale(running)
			name := e.get(id).ProviderRef[cloudrun.RefKey].(string)
			e.fake.RemoveExecution(name) // aged out of Cloud Run
			if _, ok := e.fake.Execution(name); ok {
				t.Fatal("the execution is still in the fake")
			}
			seeded := e.get(id)
			since := e.clock.Now()

			out := e.start(map[string]any{})
			_, s := outputOf(t, out)
			if s.Unknown != 1 || len(s.Settled) != 0 || s.Errored != 0 {
				t.Fatalf("first run stats = %+v, want one unknown", s)
			}
			synccheck.Unknown(t, seeded, e.get(id), since, since, 1)

			e.clock.Advance(tt.after)
			now := e.clock.Now()
			out = e.start(map[string]any{})
			_, s = outputOf(t, out)
			if calls := e.fake.Calls(cloudrunfake.GetExecution); calls != 2 {
				t.Errorf("Cloud Run calls = %d, want 2 (one a run; NotFound is not retried)", calls)
			}
			got := e.get(id)
			if !tt.lost {
				if s.Unknown != 1 || len(s.Settled) != 0 {
					t.Errorf("second run stats = %+v, want one unknown, nothing settled", s)
				}
				synccheck.Unknown(t, seeded, got, since, now, 2)
				return
			}
			if s.Unknown != 0 || !reflect.DeepEqual(s.Settled, map[string]int{ledger.OutcomeLost: 1}) {
				t.Errorf("second run stats = %+v, want one settled lost and nothing else", s)
			}
			synccheck.Lost(t, seeded, got, since, now, out.RunUUID, grace)
			if ev := got.Settlement.Evidence; ev["error"] != "NotFound" || ev["execution"] != name {
				t.Errorf("lost evidence = %v, want Cloud Run's NotFound for %s", ev, name)
			}
		})
	}
}

// d. PermissionDenied (and Unauthenticated): nothing settled, executor calls stop, the run fails
// and its record says why.
func TestPermissionDeniedSettlesNothingAndTheRunRecordSaysWhy(t *testing.T) {
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
			e := newEnv(t, options{cfg: executionsync.Config{Concurrency: concurrency}})
			seeded := faultSeed(e, rows, succeeded)
			e.spy.Reset()
			e.fake.FailRate(cloudrunfake.GetExecution, tt.code, 1) // access is denied for every execution

			out := e.start(map[string]any{"limit": 200})
			o, s := outputOf(t, out)
			synccheck.Refused(t, e.runs, seeded, e.get, out, o, s, tt.code, tt.reason, concurrency, e.clock.Now())
			if calls := e.fake.Calls(cloudrunfake.GetExecution); calls != s.Errored {
				t.Errorf("Cloud Run calls = %d, want %d: one per errored row, none after the stop", calls, s.Errored)
			}
			if w := e.executionWrites("settlement"); len(w) != 0 {
				t.Errorf("settlement writes: %v", w)
			}
		})
	}
}

// e. A call slower than the adapter's per-call timeout is cut at the timeout: the row is
// errored with DeadlineExceeded in the run's stats, and nothing is settled. A call answered
// within its timeout settles as usual, so the timeout is what makes the difference.
func TestCallsSlowerThanTheirTimeoutAreErroredDeadlineExceededAndSettleNothing(t *testing.T) {
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
			e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 4}, cloudRun: cloudrun.Config{CallTimeout: tt.timeout}})
			seeded := faultSeed(e, rows, succeeded)
			e.fake.SetLatency(cloudrunfake.GetExecution, tt.latency)

			out := e.start(map[string]any{"limit": 200})
			o, s := outputOf(t, out)
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run ended %s: %v", out.Status, out.Err)
			}
			if calls := e.fake.Calls(cloudrunfake.GetExecution); calls != rows {
				t.Errorf("Cloud Run calls = %d, want %d (DeadlineExceeded is not retried)", calls, rows)
			}
			if s.Deferred != 0 || s.OutOfBudget {
				t.Errorf("stats = %+v: the run's budget is not what cut the calls", s)
			}
			if !tt.cut {
				if s.Settled["succeeded"] != rows || s.Errored != 0 {
					t.Errorf("stats = %+v, want every row settled", s)
				}
				return
			}
			synccheck.AllTimedOut(t, seeded, e.get, o, s, e.clock.Now())
		})
	}
}

// faultCodePicker sets, before each observation, the code the fake fails a rate of GetExecution
// calls with: one code picked by its own seeded source from codes. The fake's seeded source
// decides which calls fail.
type faultCodePicker struct {
	executionsync.Executor
	fake  *cloudrunfake.Server
	codes []codes.Code
	rate  float64

	mu       sync.Mutex
	rng      *rand.Rand
	observes int
}

func (p *faultCodePicker) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	p.mu.Lock()
	p.observes++
	p.fake.FailRate(cloudrunfake.GetExecution, p.codes[p.rng.IntN(len(p.codes))], p.rate)
	p.mu.Unlock()
	return p.Executor.Observe(ctx, ref)
}

func (p *faultCodePicker) observed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.observes
}

// faultStopSpy counts the syncs that reach the executor (observations begun), arms one
// ResourceExhausted on the fake when the failAt-th begins, and counts the observations begun
// after a ResourceExhausted came back from the executor.
type faultStopSpy struct {
	executionsync.Executor
	fake   *cloudrunfake.Server
	failAt int

	mu        sync.Mutex
	begun     int
	after     int
	exhausted int
}

func (s *faultStopSpy) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	s.mu.Lock()
	s.begun++
	if s.exhausted > 0 {
		s.after++
	}
	if s.begun == s.failAt {
		s.fake.FailNext(cloudrunfake.GetExecution, codes.ResourceExhausted, 1)
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

func (s *faultStopSpy) counts() (begun, after, exhausted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun, s.after, s.exhausted
}

// faultSeed seeds n stale rows whose executions exec makes, and returns them as read back.
func faultSeed(e *env, n int, exec func(string, time.Time) *runpb.Execution) map[string]ledger.Execution {
	e.t.Helper()
	out := make(map[string]ledger.Execution, n)
	for range n {
		id := e.stale(exec)
		out[id] = e.get(id)
	}
	return out
}
