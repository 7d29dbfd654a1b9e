package ledger

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
)

// readOnlyTx runs f in one read-only transaction bounded by timeout. Read-only transactions are
// not retried.
func readOnlyTx(ctx context.Context, client *firestore.Client, timeout time.Duration, f func(context.Context, *firestore.Transaction) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return client.RunTransaction(ctx, f, firestore.ReadOnly)
}
