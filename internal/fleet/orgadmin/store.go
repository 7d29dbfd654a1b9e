// Package orgadmin is the store of the organizations documents: an operator turning an
// organization's sweeps on or off, with who, when and why, and the reads of them. What counts as
// enabled is the ledger's (ledger.SweepsEnabled), which every settling transaction reads again.
package orgadmin

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Bounds of Store.List.
const (
	ListDefault = 100
	ListMax     = 1000
)

// ReasonMax bounds the reason recorded with a change of sweeps_enabled.
const ReasonMax = 1024

// Store changes, lists and reads organizations.
type Store struct{ client *firestore.Client }

// New returns a store on client.
func New(client *firestore.Client) *Store { return &Store{client: client} }

// SetSweeps turns an organization's sweeps on or off, recording who, when (Firestore's clock)
// and why, in one transaction that keeps every other field a writer put there. When
// sweeps_enabled already is the boolean asked for it writes nothing and returns false, so the
// record of who made the change that holds stays.
func (s *Store) SetSweeps(ctx context.Context, id string, enabled bool, by, reason string) (bool, error) {
	if err := firestoreconn.CheckDocID(id); err != nil {
		return false, fmt.Errorf("set sweeps of organization %q: the id %w", id, err)
	}
	ref := s.client.Collection(ledger.OrganizationsCollection).Doc(id)
	changed := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		changed = false
		snap, err := tx.Get(ref)
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if snap != nil && snap.Exists() && ledger.SweepsEnabled(snap) == enabled {
			if v, err := snap.DataAt("sweeps_enabled"); err == nil {
				if _, isBool := v.(bool); isBool {
					return nil
				}
			}
		}
		changed = true
		return tx.Set(ref, map[string]any{
			"sweeps_enabled":    enabled,
			"sweeps_changed_by": by,
			"sweeps_changed_at": firestore.ServerTimestamp,
			"sweeps_reason":     reason,
		}, firestore.MergeAll)
	})
	if err != nil {
		return false, fmt.Errorf("set sweeps of organization %s: %w", id, err)
	}
	return changed, nil
}

// List returns up to limit organizations, enabled or not, in id order after the id `after`
// ("" from the start), and the id to resume after ("" when there are no more).
func (s *Store) List(ctx context.Context, after string, limit int) ([]ledger.Organization, string, error) {
	if limit < 1 || limit > ListMax {
		return nil, "", fmt.Errorf("list organizations: limit: between 1 and %d, got %d", ListMax, limit)
	}
	col := s.client.Collection(ledger.OrganizationsCollection)
	q := col.OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit + 1)
	if after != "" {
		q = q.StartAfter(col.Doc(after))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, "", fmt.Errorf("list organizations: %w", err)
	}
	next := ""
	if len(snaps) > limit {
		snaps, next = snaps[:limit], snaps[limit-1].Ref.ID
	}
	out := make([]ledger.Organization, 0, len(snaps))
	for _, snap := range snaps {
		var o ledger.Organization
		_ = snap.DataTo(&o) // a field of the wrong type leaves its zero: sweeps_enabled is read below
		o.UUID, o.SweepsEnabled = snap.Ref.ID, ledger.SweepsEnabled(snap)
		out = append(out, o)
	}
	return out, next, nil
}

// ListDisabled returns up to limit ids of organizations whose sweeps_enabled is the boolean
// false, in id order, after the id `after`. An organization with no document, or with a
// sweeps_enabled of another type, is not swept either, but cannot be found by a query.
func (s *Store) ListDisabled(ctx context.Context, after string, limit int) ([]string, error) {
	return s.listIDs(ctx, false, after, limit)
}

// ListEnabled returns up to limit ids of organizations with sweeps enabled, in id order, after
// the id `after` ("" from the start).
func (s *Store) ListEnabled(ctx context.Context, after string, limit int) ([]string, error) {
	return s.listIDs(ctx, true, after, limit)
}

// listIDs lists the ids of organizations whose sweeps_enabled is the boolean enabled. The
// equality filter with id order is served by Firestore's automatic single-field index.
func (s *Store) listIDs(ctx context.Context, enabled bool, after string, limit int) ([]string, error) {
	col := s.client.Collection(ledger.OrganizationsCollection)
	q := col.Where("sweeps_enabled", "==", enabled).OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit)
	if after != "" {
		q = q.StartAfter(col.Doc(after))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		what := "disabled"
		if enabled {
			what = "enabled"
		}
		return nil, fmt.Errorf("list %s organizations: %w", what, err)
	}
	ids := make([]string, len(snaps))
	for i, snap := range snaps {
		ids[i] = snap.Ref.ID
	}
	return ids, nil
}

// Enabled reports whether an organization has sweeps enabled: its document exists and its
// sweeps_enabled is true. A missing document is not enabled, as Dispatch never lists it.
func (s *Store) Enabled(ctx context.Context, id string) (bool, error) {
	snap, err := s.client.Collection(ledger.OrganizationsCollection).Doc(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read organization %s: %w", id, err)
	}
	return ledger.SweepsEnabled(snap), nil
}
