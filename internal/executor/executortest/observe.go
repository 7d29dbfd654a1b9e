package executortest

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// runObserve holds one Observe to the contract: the verdicts, the retry policy, the codes.
func runObserve(t *testing.T, h Harness) {
	p := h.Policy
	if p.MaxAttempts < 2 || !p.Retries(codes.Unavailable) {
		t.Fatalf("the adapter's policy %+v does not retry Unavailable: the suite expects it to", p)
	}

	t.Run("NotFoundIsUnknownNotAnErrorAndNeverRetried", func(t *testing.T) {
		t.Parallel()
		fake := h.New(t, time.Now, Limits{})
		ref := fake.Put(0, Running, time.Now())
		fake.Forget(ref)
		snap, err := fake.Executor().Observe(context.Background(), ref)
		if err != nil || snap.Verdict != executor.VerdictUnknown {
			t.Fatalf("Observe = %+v, %v; want unknown and no error", snap, err)
		}
		if err := fake.UnknownEvidence(ref, snap.Evidence); err != nil {
			t.Error(err)
		}
		if n := fake.Calls(); n != 1 {
			t.Errorf("calls = %d, want 1", n)
		}
	})

	t.Run("ARefThatNamesNothingIsInvalidAndNeverSent", func(t *testing.T) {
		t.Parallel()
		fake := h.New(t, time.Now, Limits{})
		x := fake.Executor()
		for _, ref := range []map[string]any{nil, {}, {"execution": 7, "job": 7}} {
			if x.ValidRef(ref) || x.Target(ref) != "" {
				t.Errorf("ref %v: valid %t, target %q", ref, x.ValidRef(ref), x.Target(ref))
			}
			if _, err := x.Observe(context.Background(), ref); status.Code(err) != codes.InvalidArgument {
				t.Errorf("ref %v: err = %v, want InvalidArgument", ref, err)
			}
		}
		if n := fake.Calls(); n != 0 {
			t.Errorf("calls = %d: a ref that names nothing reached the executor", n)
		}
	})

	// The policy's codes, as the executor answers them: a retried code up to MaxAttempts calls,
	// every other code at once.
	type attempt struct {
		name      string
		code      codes.Code
		failures  int
		wantCode  codes.Code
		wantCalls int
	}
	tests := []attempt{
		{"Unavailable until the last attempt, then an answer", codes.Unavailable, p.MaxAttempts - 1, codes.OK, p.MaxAttempts},
		{"Unavailable on every attempt", codes.Unavailable, p.MaxAttempts + 5, codes.Unavailable, p.MaxAttempts},
	}
	for _, c := range []codes.Code{codes.DeadlineExceeded, codes.ResourceExhausted, codes.PermissionDenied, codes.Unauthenticated} {
		if slices.Contains(p.Retry, c) {
			t.Fatalf("the adapter's policy retries %s", c)
		}
		tests = append(tests, attempt{c.String() + " is not retried", c, 1, c, 1})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := h.New(t, time.Now, Limits{})
			ref := fake.Put(0, Running, time.Now())
			fake.FailNext(tt.code, tt.failures)
			snap, err := fake.Executor().Observe(context.Background(), ref)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %s (err %v), want %s", got, err, tt.wantCode)
			}
			if err == nil && snap.Verdict != executor.VerdictRunning {
				t.Errorf("verdict = %s, want running", snap.Verdict)
			}
			if n := fake.Calls(); n != tt.wantCalls {
				t.Errorf("calls = %d, want %d", n, tt.wantCalls)
			}
		})
	}

	t.Run("MaxAttemptsBoundsTheCalls", func(t *testing.T) {
		t.Parallel()
		for _, max := range []int{1, 2, 5} {
			fake := h.New(t, time.Now, Limits{MaxAttempts: max})
			ref := fake.Put(0, Running, time.Now())
			fake.FailAll(codes.Unavailable)
			if _, err := fake.Executor().Observe(context.Background(), ref); status.Code(err) != codes.Unavailable || fake.Calls() != max {
				t.Errorf("MaxAttempts %d: %d calls, err %v; want %d calls, Unavailable", max, fake.Calls(), err, max)
			}
		}
	})

	t.Run("EachCallIsBoundedByItsTimeoutAndATimeoutIsNotRetried", func(t *testing.T) {
		t.Parallel()
		fake := h.New(t, time.Now, Limits{CallTimeout: 50 * time.Millisecond})
		ref := fake.Put(0, Running, time.Now())
		fake.Delay(time.Minute)
		start := time.Now()
		_, err := fake.Executor().Observe(context.Background(), ref)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("the call ran %s: the timeout did not bound it", elapsed)
		}
		if calls, cut := fake.Calls(), fake.Cut(); calls != 1 || cut != 1 {
			t.Errorf("calls = %d, cut by their deadline = %d; want 1 and 1", calls, cut)
		}
	})

	// A blind target — every execution of one place is NotFound — reads as unknown for each of
	// its executions, all under one target; another place keeps its own target and its answers.
	t.Run("EveryExecutionOfABlindTargetIsUnknownUnderOneTarget", func(t *testing.T) {
		t.Parallel()
		fake := h.New(t, time.Now, Limits{})
		x := fake.Executor()
		var blind []map[string]any
		for range 4 {
			ref := fake.Put(0, Running, time.Now())
			fake.Forget(ref)
			blind = append(blind, ref)
		}
		seeing := fake.Put(1, Running, time.Now())
		target := x.Target(blind[0])
		if target == "" || x.Target(seeing) == "" || x.Target(seeing) == target {
			t.Fatalf("targets %q (blind) and %q (seeing): want two distinct, non-empty", target, x.Target(seeing))
		}
		for _, ref := range blind {
			snap, err := x.Observe(context.Background(), ref)
			if err != nil || snap.Verdict != executor.VerdictUnknown || x.Target(ref) != target || !x.ValidRef(ref) {
				t.Errorf("%v: %+v %v under target %q (valid %t), want unknown under %q", ref, snap, err, x.Target(ref), x.ValidRef(ref), target)
			}
		}
		if snap, err := x.Observe(context.Background(), seeing); err != nil || snap.Verdict != executor.VerdictRunning {
			t.Errorf("the other target's execution: %+v %v, want running", snap, err)
		}
		if n := fake.Calls(); n != len(blind)+1 {
			t.Errorf("calls = %d, want %d: one each", n, len(blind)+1)
		}
	})
}
