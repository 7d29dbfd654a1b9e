package pausestore

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	return s.client.Collection(PausesCollection).Doc(PauseID(workflowType, scope))
}

// Put writes p over the pause of the same workflow type and scope, ExpireAt set from Until.
func (s *Store) Put(ctx context.Context, p Pause) error {
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
		return false, fmt.Errorf("resume %s: %w", PauseID(workflowType, scope), err)
	}
	return existed, nil
}

// Covering returns the pause holding at now over workflowType on scope, or nil: one read of at most three documents.
func (s *Store) Covering(ctx context.Context, workflowType, scope string, now time.Time) (*Pause, error) {
	snaps, err := s.client.GetAll(ctx, s.refs(PauseIDs(workflowType, scope)))
	if err != nil {
		return nil, fmt.Errorf("read pauses of %s on %s: %w", workflowType, scope, err)
	}
	return ActivePause(DecodePauses(snaps), now), nil
}

// List returns up to limit (at most PauseListMax) pauses in id order, ended ones included, of
// workflowType when it is not empty (Firestore's automatic single-field index serves it).
func (s *Store) List(ctx context.Context, workflowType string, limit int) ([]Pause, error) {
	if limit <= 0 || limit > PauseListMax {
		limit = PauseListMax
	}
	q := s.client.Collection(PausesCollection).Query
	if workflowType != "" {
		q = q.Where("workflow_type", "==", workflowType)
	}
	snaps, err := q.OrderBy(firestore.DocumentID, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return DecodePauses(snaps), nil
}

func (s *Store) refs(ids []string) []*firestore.DocumentRef {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.client.Collection(PausesCollection).Doc(id)
	}
	return refs
}

// check reports why p cannot be stored, naming the field and the rule, or nil.
func check(p Pause) error {
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

// PausesCollection holds one document per paused workflow type and scope (sweep_pauses).
const PausesCollection = "sweep_pauses"

// Pause is a sweep_pauses document: a workflow type stopped on one scope, or on every scope.
type Pause struct {
	WorkflowType string `firestore:"workflow_type" json:"workflow_type"`
	// Scope is the paused scope in workflow.ScopeValues.Key form (an organization uuid,
	// "org/group", a queue), or "" for the whole fleet of the workflow. A pause covers its scope
	// and every scope under it: an organization's pause covers its runner groups.
	Scope    string    `firestore:"scope" json:"scope"`
	PausedBy string    `firestore:"paused_by" json:"paused_by"`
	PausedAt time.Time `firestore:"paused_at" json:"paused_at"`
	Reason   string    `firestore:"reason" json:"reason"`
	// Until is when the pause ends by itself; zero while it holds until resumed.
	Until time.Time `firestore:"until,omitempty" json:"until,omitzero"`
	// ExpireAt is Until, for the collection's TTL policy to delete the document once the pause
	// has ended; absent (never deleted) while the pause is indefinite.
	ExpireAt time.Time `firestore:"expire_at,omitempty" json:"expire_at,omitzero"`
}

// Fleet reports whether the pause covers every scope of its workflow.
func (p Pause) Fleet() bool { return p.Scope == "" }

// Active reports whether the pause holds at now: it has no end, or has not reached it.
func (p Pause) Active(now time.Time) bool { return p.Until.IsZero() || now.Before(p.Until) }

// Covers reports whether the pause covers scope (a ScopeValues.Key): it is fleet-wide, names the
// scope, or names a scope it lies under ("org" covers "org/group").
func (p Pause) Covers(scope string) bool {
	return p.Fleet() || p.Scope == scope || strings.HasPrefix(scope, p.Scope+"/")
}

func (p Pause) String() string {
	s := fmt.Sprintf("%s paused on %s by %s at %s", p.WorkflowType, p.ScopeName(), p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339))
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	if !p.Until.IsZero() {
		s += " (until " + p.Until.UTC().Format(time.RFC3339) + ")"
	}
	return s
}

// ScopeName is the scope for people: the key, or "the fleet".
func (p Pause) ScopeName() string {
	if p.Fleet() {
		return "the fleet"
	}
	return p.Scope
}

// PauseID is the document id of the pause of workflowType on scope ("" for the fleet): the same
// for the same pair, so pausing twice writes one document. The scope is escaped, so no two
// scopes share an id, and "@fleet" cannot be a scope's.
func PauseID(workflowType, scope string) string {
	if scope == "" {
		return workflowType + "@fleet"
	}
	return workflowType + ":" + url.PathEscape(scope)
}

// PauseIDs are the ids of every pause that would cover a run of workflowType on scope (a
// ScopeValues.Key; "fleet" or "" for a fleet-wide run): the fleet's, then each scope the run's
// lies under, then its own. A settling transaction reads them all (Reads.Pauses).
func PauseIDs(workflowType, scope string) []string {
	ids := []string{PauseID(workflowType, "")}
	if scope == "" || scope == "fleet" {
		return ids
	}
	parts := strings.Split(scope, "/")
	for i := range parts {
		ids = append(ids, PauseID(workflowType, strings.Join(parts[:i+1], "/")))
	}
	return ids
}

// ActivePause returns the first of pauses that holds at now, or nil.
func ActivePause(pauses []Pause, now time.Time) *Pause {
	for i := range pauses {
		if pauses[i].Active(now) {
			return &pauses[i]
		}
	}
	return nil
}

// DecodePauses decodes the snapshots that exist; one that does not decode is skipped.
func DecodePauses(snaps []*firestore.DocumentSnapshot) []Pause {
	var out []Pause
	for _, snap := range snaps {
		if snap == nil || !snap.Exists() {
			continue
		}
		var p Pause
		if err := snap.DataTo(&p); err == nil {
			out = append(out, p)
		}
	}
	return out
}
