package executor

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of RetryPolicy, which both adapters use unchanged.
const (
	CallTimeoutDefault = 10 * time.Second       // per attempt
	MaxAttemptsDefault = 3                      // attempts per observation, the first included
	BackoffDefault     = 200 * time.Millisecond // first retry's backoff ceiling; doubles per retry
)

// RetryDefault is the codes a policy retries unless it says otherwise: Unavailable only.
// DeadlineExceeded is not retried (the attempt's own budget is spent, and the next run asks
// again); every other code says something a second attempt would not change.
var RetryDefault = []codes.Code{codes.Unavailable}

// RetryPolicy is how an adapter calls its executor for one observation. Zero values take the
// defaults (WithDefaults).
type RetryPolicy struct {
	// CallTimeout bounds each attempt on its own: the generated Cloud Run client sets none, and
	// client-go's only bound is the per-request timeout of its rest.Config.
	CallTimeout time.Duration
	// MaxAttempts bounds the attempts of one observation, the first included.
	MaxAttempts int
	// Backoff is the ceiling of the first retry's wait; each retry waits a uniformly random
	// time in (0, ceiling] and doubles the ceiling.
	Backoff time.Duration
	// Retry is the codes worth another attempt (nil: RetryDefault). The code of an error is the
	// adapter's to say (Do's code argument).
	Retry []codes.Code
}

// WithDefaults returns p with every zero field set to its default.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	p.CallTimeout = cmp.Or(p.CallTimeout, CallTimeoutDefault)
	p.MaxAttempts = cmp.Or(p.MaxAttempts, MaxAttemptsDefault)
	p.Backoff = cmp.Or(p.Backoff, BackoffDefault)
	if p.Retry == nil {
		p.Retry = RetryDefault
	}
	return p
}

// Retries reports whether the policy makes another attempt after an error of code c.
func (p RetryPolicy) Retries(c codes.Code) bool { return slices.Contains(p.Retry, c) }

// Do calls call, each attempt under its own context bounded by CallTimeout, until an attempt
// succeeds, fails with an error whose code (as code maps it; status.Code for a gRPC client) the
// policy does not retry, MaxAttempts attempts have failed, or ctx ends. It returns the number of
// attempts made and nil, the last attempt's error as call returned it, or — when ctx ended, after
// an attempt or during a backoff — ctx.Err(). An answer that is not a failure (NotFound, for an
// executor, is VerdictUnknown) is call's to turn into nil.
func (p RetryPolicy) Do(ctx context.Context, code func(error) codes.Code, call func(ctx context.Context) error) (int, error) {
	p = p.WithDefaults()
	backoff := p.Backoff
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, p.CallTimeout)
		err := call(callCtx)
		cancel()
		switch {
		case err == nil:
			return attempt, nil
		case ctx.Err() != nil:
			return attempt, ctx.Err()
		case attempt >= p.MaxAttempts || !p.Retries(code(err)):
			return attempt, err
		}
		if err := sleep(ctx, rand.N(backoff)+1); err != nil {
			return attempt, err
		}
		backoff *= 2
	}
}

// Stops reports whether an executor error stops the run's further executor calls, and the
// reason the run records (stats.stopped_by; the run fails with executor_<reason> unless the
// reason is resource_exhausted). ResourceExhausted is the executor asking to be left alone for
// now; PermissionDenied and Unauthenticated mean no later row can do better until an operator
// fixes access.
func Stops(err error) (reason string, stops bool) {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return "resource_exhausted", true
	case codes.PermissionDenied:
		return "permission_denied", true
	case codes.Unauthenticated:
		return "unauthenticated", true
	}
	return "", false
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
