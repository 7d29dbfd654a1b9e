package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDoRetriesThePolicysCodesUpToMaxAttempts(t *testing.T) {
	p := RetryPolicy{CallTimeout: time.Second, MaxAttempts: 3, Backoff: time.Millisecond}
	tests := []struct {
		name     string
		errs     []codes.Code // one per attempt; OK answers
		attempts int
		code     codes.Code
	}{
		{"an answer at once", []codes.Code{codes.OK}, 1, codes.OK},
		{"Unavailable, then an answer", []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK}, 3, codes.OK},
		{"Unavailable on every attempt", []codes.Code{codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.OK}, 3, codes.Unavailable},
		{"DeadlineExceeded is not retried", []codes.Code{codes.DeadlineExceeded, codes.OK}, 1, codes.DeadlineExceeded},
		{"a code after Unavailable ends it", []codes.Code{codes.Unavailable, codes.PermissionDenied, codes.OK}, 2, codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			attempts, err := p.Do(context.Background(), status.Code, func(ctx context.Context) error {
				if d, ok := ctx.Deadline(); !ok || time.Until(d) > p.CallTimeout {
					t.Errorf("attempt %d has no deadline of its own within %s", calls+1, p.CallTimeout)
				}
				calls++
				return status.Error(tt.errs[calls-1], "fault")
			})
			if attempts != tt.attempts || calls != tt.attempts || status.Code(err) != tt.code {
				t.Errorf("%d attempts (%d calls), %v; want %d, %s", attempts, calls, err, tt.attempts, tt.code)
			}
		})
	}
}

func TestDoStopsWhenItsContextEnds(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 5, Backoff: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	time.AfterFunc(20*time.Millisecond, cancel)
	attempts, err := p.Do(ctx, status.Code, func(context.Context) error {
		calls++
		return status.Error(codes.Unavailable, "down")
	})
	if !errors.Is(err, context.Canceled) || attempts != 1 || calls != 1 {
		t.Errorf("%d attempts, %v; want 1 and the context's error, not a wait of up to an hour", attempts, err)
	}
}

func TestDefaultsAreTodays(t *testing.T) {
	p := RetryPolicy{}.WithDefaults()
	if p.CallTimeout != 10*time.Second || p.MaxAttempts != 3 || p.Backoff != 200*time.Millisecond ||
		len(p.Retry) != 1 || !p.Retries(codes.Unavailable) {
		t.Errorf("defaults = %+v", p)
	}
}

func TestStops(t *testing.T) {
	for c, want := range map[codes.Code]string{codes.ResourceExhausted: "resource_exhausted", codes.PermissionDenied: "permission_denied",
		codes.Unauthenticated: "unauthenticated", codes.Unavailable: "", codes.DeadlineExceeded: "", codes.NotFound: ""} {
		if why, stops := Stops(status.Error(c, "x")); why != want || stops != (want != "") {
			t.Errorf("%s: %q %t, want %q", c, why, stops, want)
		}
	}
}
