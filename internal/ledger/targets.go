package ledger

import (
	"net/url"
	"time"
)

// TargetsCollection holds one document per executor target that has been judged blind or not.
const TargetsCollection = "sweep_targets"

// Target is a sweep_targets document.
type Target struct {
	Target   string    `firestore:"target"`
	Blind    bool      `firestore:"blind"`
	JudgedAt time.Time `firestore:"judged_at"`
	// Asked and Unknown are the counts the judgment was made on.
	Asked   int64 `firestore:"asked"`
	Unknown int64 `firestore:"unknown"`
	// BlindSince is when the target was first judged blind, since it last was not.
	BlindSince time.Time `firestore:"blind_since,omitempty"`
	// ClearedAt is when an operator last vouched for the target: rows unknown since before then
	// are taken as gone, and only later ones count against it.
	ClearedAt time.Time `firestore:"cleared_at,omitempty"`
	ClearedBy string    `firestore:"cleared_by,omitempty"`
	// ExpireAt is when the judgment may be deleted (ExpireField); one deleted is as if never judged.
	ExpireAt time.Time `firestore:"expire_at,omitempty"`
}

// TargetID is a target's document id: the target with "/" escaped.
func TargetID(target string) string { return url.PathEscape(target) }
