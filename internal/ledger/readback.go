package ledger

import (
	"context"
)

// readBack bounds the read that resolves an ambiguous commit as a transaction is bounded; it
// stays inside the caller's context (the run's budget).
func (c TxConfig) readBack(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.Timeout)
}
