package ledgertest

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Organizations writes organizations documents as a writer that creates the document itself
// does: whole, sweeps_enabled a bool, the sweeps_changed_* fields left to the command.
type Organizations struct {
	Client *firestore.Client
}

// Put writes an organization.
func (w Organizations) Put(ctx context.Context, o ledger.Organization) error {
	if _, err := w.Client.Collection(ledger.OrganizationsCollection).Doc(o.UUID).Set(ctx, o); err != nil {
		return fmt.Errorf("put organization %s: %w", o.UUID, err)
	}
	return nil
}
