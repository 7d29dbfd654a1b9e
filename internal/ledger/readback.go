package ledger

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Ambiguous reports whether a transaction (a settlement, a run record's start or end) that
// failed with err may have committed all the same: a Commit retried after Unavailable finds its
// transaction closed once the first try landed (InvalidArgument), and a deadline or a lost
// connection may fall after the server applied the writes. Such a failure is resolved by
// reading back what it wrote: a row that carries this run's settlement was settled by this run.
// Any other error wrote nothing (a refusal the transaction decided carries no such code).
func Ambiguous(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return false
}

// readBack bounds the read that resolves an ambiguous commit as a transaction is bounded; it
// stays inside the caller's context (the run's budget).
func (c TxConfig) readBack(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.Timeout)
}
