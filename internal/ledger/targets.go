package ledger

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TargetsCollection holds one document per executor target — a Cloud Run project and region, a
// Kubernetes cluster — that has been judged: whether it is blind (it answers NotFound for too
// many of the executions it should know), when it was judged, and an operator's clearance.
const TargetsCollection = "sweep_targets"

// Target is a sweep_targets document.
type Target struct {
	Target   string    `firestore:"target"`
	Blind    bool      `firestore:"blind"`
	JudgedAt time.Time `firestore:"judged_at"`
	// Asked and Unknown are the counts the judgment was made on: rows of the target it answered
	// about within the window, and active rows of it it does not know (since the clearance).
	Asked   int64 `firestore:"asked"`
	Unknown int64 `firestore:"unknown"`
	// BlindSince is when the target was first judged blind, since it last was not.
	BlindSince time.Time `firestore:"blind_since,omitempty"`
	// ClearedAt is when an operator last vouched for the target: rows unknown since before then
	// are taken as gone, and only later ones count against it.
	ClearedAt time.Time `firestore:"cleared_at,omitempty"`
	ClearedBy string    `firestore:"cleared_by,omitempty"`
	// ExpireAt is when the judgment may be deleted (ExpireField): the retention after the last
	// judgment or clearance, notable while the target is blind. A target judged again is written
	// again; one deleted is as if never judged, and its next judgment starts afresh.
	ExpireAt time.Time `firestore:"expire_at,omitempty"`
}

// TargetID is a target's document id: the target with "/" escaped.
func TargetID(target string) string { return url.PathEscape(target) }

// TargetStore reads and writes executor targets' judgments.
type TargetStore struct {
	client *firestore.Client
	keep   Retention
}

// NewTargetStore returns a store on client whose judgments expire after keep (zero durations
// take the defaults).
func NewTargetStore(client *firestore.Client, keep Retention) *TargetStore {
	return &TargetStore{client: client, keep: keep.WithDefaults()}
}

func (s *TargetStore) ref(target string) *firestore.DocumentRef {
	return s.client.Collection(TargetsCollection).Doc(TargetID(target))
}

// Get reads a target's judgment; found is false when it was never judged.
func (s *TargetStore) Get(ctx context.Context, target string) (t Target, found bool, err error) {
	snap, err := s.ref(target).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Target{Target: target}, false, nil
	}
	if err != nil {
		return Target{}, false, fmt.Errorf("get target %s: %w", target, err)
	}
	if err := snap.DataTo(&t); err != nil {
		return Target{}, false, fmt.Errorf("decode target %s: %w", target, err)
	}
	return t, true, nil
}

// Count counts, fleet-wide, the rows of target its executor answered about since since (found or
// not: sync.last_synced_at), and the active rows of it the executor does not know whose unknown
// spell began after clearedAt. Two aggregation queries, served by declared indexes; nothing is
// read but index entries.
func (s *TargetStore) Count(ctx context.Context, target string, since, clearedAt time.Time) (asked, unknown int64, err error) {
	rows := s.client.Collection(ExecutionsCollection)
	if asked, err = count(ctx, rows.Where("sync.target", "==", target).Where("sync.last_synced_at", ">=", since), "count rows asked of "+target); err != nil {
		return 0, 0, err
	}
	after := clearedAt
	if after.IsZero() {
		after = firestoreMinTime
	}
	unknown, err = count(ctx, rows.Where("active", "==", true).Where("sync.target", "==", target).Where("sync.unknown_since", ">", after),
		"count rows unknown to "+target)
	return asked, unknown, err
}

// Record writes a judgment, in a transaction that keeps the operator's clearance and when the
// target became blind.
func (s *TargetStore) Record(ctx context.Context, t Target) (Target, error) {
	ref := s.ref(t.Target)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		var cur Target
		switch {
		case status.Code(err) == codes.NotFound:
		case err != nil:
			return err
		default:
			if err := snap.DataTo(&cur); err != nil {
				return err
			}
		}
		t.ClearedAt, t.ClearedBy, t.BlindSince = cur.ClearedAt, cur.ClearedBy, time.Time{}
		if t.Blind {
			t.BlindSince = cur.BlindSince
			if !cur.Blind || t.BlindSince.IsZero() {
				t.BlindSince = t.JudgedAt
			}
		}
		t.ExpireAt = ExpiryAt(t.JudgedAt, s.keep, t.Blind)
		return tx.Set(ref, t)
	}, firestore.MaxAttempts(3))
	if err != nil {
		return Target{}, fmt.Errorf("record target %s: %w", t.Target, err)
	}
	return t, nil
}

// Clear records an operator's clearance of a target at `at`: it is not blind, and the rows
// unknown to it since before `at` are taken as gone. The next judgment counts only rows whose
// unknown spell began later.
func (s *TargetStore) Clear(ctx context.Context, target, by string, at time.Time) error {
	_, err := s.ref(target).Set(ctx, map[string]any{
		"target": target, "blind": false, "cleared_at": at, "cleared_by": by, "blind_since": firestore.Delete,
		// A clearance is a judgment: until the next one, the target is not blind.
		"judged_at": at,
		ExpireField: ExpiryAt(at, s.keep, false),
	}, firestore.MergeAll)
	if err != nil {
		return fmt.Errorf("clear target %s: %w", target, err)
	}
	return nil
}

// Known reports whether the blind-executor guard knows target: it has been judged (its
// sweep_targets document exists) or a row names it as the target that last answered about it
// (sync.target). Two reads of at most one document each.
func (s *TargetStore) Known(ctx context.Context, target string) (bool, error) {
	_, found, err := s.Get(ctx, target)
	if err != nil || found {
		return found, err
	}
	snaps, err := s.client.Collection(ExecutionsCollection).Where("sync.target", "==", target).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return false, fmt.Errorf("look up rows of target %s: %w", target, err)
	}
	return len(snaps) > 0, nil
}

// List returns up to limit judged targets, blind ones first.
func (s *TargetStore) List(ctx context.Context, limit int) ([]Target, error) {
	snaps, err := s.client.Collection(TargetsCollection).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	var blind, seeing []Target
	for _, snap := range snaps {
		var t Target
		if err := snap.DataTo(&t); err != nil {
			continue // a document no judgment wrote
		}
		if t.Blind {
			blind = append(blind, t)
		} else {
			seeing = append(seeing, t)
		}
	}
	return append(blind, seeing...), nil
}
