package ledger

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"
)

// OrganizationsCollection holds one document per organization; the dispatcher enumerates it.
const OrganizationsCollection = "organizations"

// Organization is an organizations document.
type Organization struct {
	UUID          string `firestore:"-"`
	SweepsEnabled bool   `firestore:"sweeps_enabled"`
}

// OrganizationStore reads organizations.
type OrganizationStore struct{ client *firestore.Client }

// NewOrganizationStore returns a store on client.
func NewOrganizationStore(client *firestore.Client) *OrganizationStore {
	return &OrganizationStore{client: client}
}

// Put writes an organization. Tests and the demo use it.
func (s *OrganizationStore) Put(ctx context.Context, o Organization) error {
	if _, err := s.client.Collection(OrganizationsCollection).Doc(o.UUID).Set(ctx, o); err != nil {
		return fmt.Errorf("put organization %s: %w", o.UUID, err)
	}
	return nil
}

// ListEnabled returns up to limit ids of organizations with sweeps enabled, in id order, after
// the id `after` ("" from the start). The equality filter with id order is served by Firestore's
// automatic single-field index.
func (s *OrganizationStore) ListEnabled(ctx context.Context, after string, limit int) ([]string, error) {
	q := s.client.Collection(OrganizationsCollection).
		Where("sweeps_enabled", "==", true).
		OrderBy(firestore.DocumentID, firestore.Asc).
		Limit(limit)
	if after != "" {
		q = q.StartAfter(s.client.Collection(OrganizationsCollection).Doc(after))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list enabled organizations: %w", err)
	}
	ids := make([]string, len(snaps))
	for i, s := range snaps {
		ids[i] = s.Ref.ID
	}
	return ids, nil
}
