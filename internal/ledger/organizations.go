package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// OrganizationsCollection holds one document per organization; the dispatcher enumerates it.
const OrganizationsCollection = "organizations"

// Organization is an organizations document. The sweeps_changed_* fields record the last
// change orgadmin's SetSweeps made: who (the actor, as run records name it), when, and why.
type Organization struct {
	UUID            string    `firestore:"-" json:"organization_uuid"`
	SweepsEnabled   bool      `firestore:"sweeps_enabled" json:"sweeps_enabled"`
	SweepsChangedBy string    `firestore:"sweeps_changed_by,omitempty" json:"sweeps_changed_by,omitempty"`
	SweepsChangedAt time.Time `firestore:"sweeps_changed_at,omitempty" json:"sweeps_changed_at,omitzero"`
	SweepsReason    string    `firestore:"sweeps_reason,omitempty" json:"sweeps_reason,omitempty"`
}

// OrganizationStore reads organizations.
type OrganizationStore struct{ client *firestore.Client }

// NewOrganizationStore returns a store on client.
func NewOrganizationStore(client *firestore.Client) *OrganizationStore {
	return &OrganizationStore{client: client}
}

func (s *OrganizationStore) ref(id string) *firestore.DocumentRef {
	return s.client.Collection(OrganizationsCollection).Doc(id)
}

// Enabled reports whether an organization has sweeps enabled: its document exists and its
// sweeps_enabled is true. A missing document is not enabled, as Dispatch never lists it.
func (s *OrganizationStore) Enabled(ctx context.Context, id string) (bool, error) {
	snap, err := s.ref(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read organization %s: %w", id, err)
	}
	return SweepsEnabled(snap), nil
}

// SweepsEnabled reads an organizations document as a transaction or a read got it: true only
// when it exists and its sweeps_enabled is the boolean true.
func SweepsEnabled(snap *firestore.DocumentSnapshot) bool {
	if snap == nil || !snap.Exists() {
		return false
	}
	v, err := snap.DataAt("sweeps_enabled")
	enabled, _ := v.(bool)
	return err == nil && enabled
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
