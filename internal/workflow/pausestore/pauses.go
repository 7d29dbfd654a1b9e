package pausestore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// PauseListMax bounds how many pauses one read lists: pauses are an operator's few, and a
// reader that needs every one (Dispatch) is backed by the check each run makes at its start.
const PauseListMax = 1000

// ReasonMax bounds a pause's reason, in bytes.
const ReasonMax = 1024

// Store writes and reads pauses.
type Store struct{ client *firestore.Client }

// New returns a store on client.
func New(client *firestore.Client) *Store { return &Store{client: client} }

func (s *Store) ref(workflowType, scope string) *firestore.DocumentRef {
	return s.client.Collection(ledger.PausesCollection).Doc(ledger.PauseID(workflowType, scope))
}

// Put writes p over the pause of the same workflow type and scope, ExpireAt set from Until.
func (s *Store) Put(ctx context.Context, p ledger.Pause) error {
	if err := check(p); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	p.ExpireAt = p.Until
	if _, err := s.ref(p.WorkflowType, p.Scope).Set(ctx, p); err != nil {
		return fmt.Errorf("pause %s on %s: %w", p.WorkflowType, p.ScopeName(), err)
	}
	return nil
}

// Delete removes the pause of workflowType on scope ("" for the fleet), reporting whether there was one.
func (s *Store) Delete(ctx context.Context, workflowType, scope string) (bool, error) {
	ref := s.ref(workflowType, scope)
	existed := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			existed = false
			return nil
		}
		if err != nil {
			return err
		}
		existed = snap.Exists()
		return tx.Delete(ref)
	}, firestore.MaxAttempts(3))
	if err != nil {
		return false, fmt.Errorf("resume %s: %w", ledger.PauseID(workflowType, scope), err)
	}
	return existed, nil
}

// Covering returns the pause holding at now over workflowType on scope, or nil: one read of at most three documents.
func (s *Store) Covering(ctx context.Context, workflowType, scope string, now time.Time) (*ledger.Pause, error) {
	snaps, err := s.client.GetAll(ctx, s.refs(ledger.PauseIDs(workflowType, scope)))
	if err != nil {
		return nil, fmt.Errorf("read pauses of %s on %s: %w", workflowType, scope, err)
	}
	return ledger.ActivePause(ledger.DecodePauses(snaps), now), nil
}

// List returns up to limit (at most PauseListMax) pauses in id order, ended ones included, of
// workflowType when it is not empty (Firestore's automatic single-field index serves it).
func (s *Store) List(ctx context.Context, workflowType string, limit int) ([]ledger.Pause, error) {
	if limit <= 0 || limit > PauseListMax {
		limit = PauseListMax
	}
	q := s.client.Collection(ledger.PausesCollection).Query
	if workflowType != "" {
		q = q.Where("workflow_type", "==", workflowType)
	}
	snaps, err := q.OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return ledger.DecodePauses(snaps), nil
}

func (s *Store) refs(ids []string) []*firestore.DocumentRef {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.client.Collection(ledger.PausesCollection).Doc(id)
	}
	return refs
}

// check reports why p cannot be stored, naming the field and the rule, or nil.
func check(p ledger.Pause) error {
	switch {
	case p.WorkflowType == "":
		return fmt.Errorf("workflow_type: required")
	case p.PausedBy == "":
		return fmt.Errorf("paused_by: required")
	case p.PausedAt.IsZero():
		return fmt.Errorf("paused_at: required")
	case len(p.Reason) > ReasonMax:
		return fmt.Errorf("reason: maxLength: longer than %d bytes", ReasonMax)
	case !p.Until.IsZero() && !p.Until.After(p.PausedAt):
		return fmt.Errorf("until: must be after paused_at")
	case strings.HasPrefix(p.Scope, "/") || strings.HasSuffix(p.Scope, "/") || strings.Contains(p.Scope, "//"):
		return fmt.Errorf("scope: format: %q has an empty part", p.Scope)
	}
	return nil
}
