package ledgertest

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Executions writes runner_executions as a runner does.
type Executions struct {
	Client *firestore.Client
}

// Put writes a whole row.
func (w Executions) Put(ctx context.Context, e ledger.Execution) error {
	if _, err := w.Client.Collection(ledger.ExecutionsCollection).Doc(e.UUID).Set(ctx, e); err != nil {
		return fmt.Errorf("put execution %s: %w", e.UUID, err)
	}
	return nil
}
