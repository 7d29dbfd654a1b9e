package ledger

import (
	"time"

	"cloud.google.com/go/firestore"
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
