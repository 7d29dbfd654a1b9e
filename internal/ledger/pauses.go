package ledger

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
)

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

// pauseRefs are the documents of the pause ids ids (PauseIDs), for a settling transaction to
// read with its row.
func pauseRefs(client *firestore.Client, ids []string) []*firestore.DocumentRef {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = client.Collection(PausesCollection).Doc(id)
	}
	return refs
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
