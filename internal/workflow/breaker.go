package workflow

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StoreBreakerThreshold is how many row transactions in a row may fail for the store's reason
// before the run stops: the store is down, and every further row would wait out its timeout.
const StoreBreakerThreshold = 5

// ErrStoreUnavailable is the cause a run's body context is cancelled with when the breaker trips.
var ErrStoreUnavailable = errors.New("the store failed too many row transactions in a row")

type storeBreaker struct {
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	failed int
}

type breakerKey struct{}

// NoteRow tells the run whose body context ctx is how one row's transaction ended (nil for a
// commit or a decision to write nothing). Outside a run it does nothing.
func NoteRow(ctx context.Context, err error) {
	b, _ := ctx.Value(breakerKey{}).(*storeBreaker)
	if b == nil || ctx.Err() != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !storeFailure(err) {
		b.failed = 0
		return
	}
	b.failed++
	if b.failed >= StoreBreakerThreshold {
		b.cancel(ErrStoreUnavailable)
	}
}

func withBreaker(ctx context.Context, cancel context.CancelCauseFunc) context.Context {
	return context.WithValue(ctx, breakerKey{}, &storeBreaker{cancel: cancel})
}

// storeFailure reports whether a row transaction failed for the store's reason, not the row's.
func storeFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
