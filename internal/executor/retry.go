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

// Config is an adapter's bounds on its calls; zero values take the defaults.
type Config struct {
	CallTimeout time.Duration
	MaxAttempts int
	Backoff     time.Duration
}

// Policy is the retry policy an adapter calls its executor under, retrying Unavailable.
func (c Config) Policy() RetryPolicy {
	return RetryPolicy{CallTimeout: c.CallTimeout, MaxAttempts: c.MaxAttempts, Backoff: c.Backoff,
		Retry: []codes.Code{codes.Unavailable}}.WithDefaults()
}

// RetryDefault is the codes a policy retries: a second attempt changes nothing for any other.
var RetryDefault = []codes.Code{codes.Unavailable}

// RetryPolicy is how an adapter calls its executor for one observation (zero: the defaults).
type RetryPolicy struct {
	// CallTimeout bounds each attempt on its own: neither the generated Cloud Run client nor
	// client-go (beyond its per-request timeout) bounds a call.
	CallTimeout time.Duration
	MaxAttempts int
	// Backoff is the ceiling of the first retry's wait; each retry waits a uniformly random
	// time in (0, ceiling] and doubles the ceiling.
	Backoff time.Duration
	// Retry is the codes worth another attempt (nil: RetryDefault).
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

// Do calls call, each attempt under its own CallTimeout, until one succeeds, fails with a code
// the policy does not retry, MaxAttempts have failed, or ctx ends; it returns the attempts made.
// An answer that is not a failure (NotFound: VerdictUnknown) is call's to turn into nil.
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
// reason the run records (stats.stopped_by); see the package doc.
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
