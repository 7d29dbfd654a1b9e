package targetstore

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Store reads and writes executor targets' judgments.
type Store struct {
	client *firestore.Client
	keep   ledger.Retention
}

// New returns a store on client whose judgments expire after keep (zero: the defaults).
func New(client *firestore.Client, keep ledger.Retention) *Store {
	return &Store{client: client, keep: keep.WithDefaults()}
}

func (s *Store) ref(target string) *firestore.DocumentRef {
	return s.client.Collection(ledger.TargetsCollection).Doc(ledger.TargetID(target))
}

// Get reads a target's judgment; found is false when it was never judged.
func (s *Store) Get(ctx context.Context, target string) (t ledger.Target, found bool, err error) {
	snap, err := s.ref(target).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return ledger.Target{Target: target}, false, nil
	}
	if err != nil {
		return ledger.Target{}, false, fmt.Errorf("get target %s: %w", target, err)
	}
	if err := snap.DataTo(&t); err != nil {
		return ledger.Target{}, false, fmt.Errorf("decode target %s: %w", target, err)
	}
	return t, true, nil
}

// Count counts, fleet-wide, the rows of target its executor answered about since since
// (sync.last_synced_at), and its active rows unknown since after clearedAt: two aggregation
// queries on declared indexes, reading nothing but index entries.
func (s *Store) Count(ctx context.Context, target string, since, clearedAt time.Time) (asked, unknown int64, err error) {
	rows := s.client.Collection(ledger.ExecutionsCollection)
	if asked, err = ledger.Count(ctx, rows.Where("sync.target", "==", target).Where("sync.last_synced_at", ">=", since), "count rows asked of "+target); err != nil {
		return 0, 0, err
	}
	after := clearedAt
	if after.IsZero() {
		after = firestoreconn.MinTime
	}
	unknown, err = ledger.Count(ctx, rows.Where("active", "==", true).Where("sync.target", "==", target).Where("sync.unknown_since", ">", after),
		"count rows unknown to "+target)
	return asked, unknown, err
}

// Record writes a judgment, in a transaction that keeps the operator's clearance and when the
// target became blind.
func (s *Store) Record(ctx context.Context, t ledger.Target) (ledger.Target, error) {
	ref := s.ref(t.Target)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		var cur ledger.Target
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
		t.ExpireAt = ledger.ExpiryAt(t.JudgedAt, s.keep, t.Blind)
		return tx.Set(ref, t)
	}, firestore.MaxAttempts(3))
	if err != nil {
		return ledger.Target{}, fmt.Errorf("record target %s: %w", t.Target, err)
	}
	return t, nil
}

// Clear records an operator's clearance of a target at `at` (the blindguard package doc).
func (s *Store) Clear(ctx context.Context, target, by string, at time.Time) error {
	_, err := s.ref(target).Set(ctx, map[string]any{
		"target": target, "blind": false, "cleared_at": at, "cleared_by": by, "blind_since": firestore.Delete,
		// A clearance is a judgment: until the next one, the target is not blind.
		"judged_at":        at,
		ledger.ExpireField: ledger.ExpiryAt(at, s.keep, false),
	}, firestore.MergeAll)
	if err != nil {
		return fmt.Errorf("clear target %s: %w", target, err)
	}
	return nil
}

// Known reports whether the guard knows target: it has been judged, or a row names it
// (sync.target). Two reads of at most one document each.
func (s *Store) Known(ctx context.Context, target string) (bool, error) {
	_, found, err := s.Get(ctx, target)
	if err != nil || found {
		return found, err
	}
	snaps, err := s.client.Collection(ledger.ExecutionsCollection).Where("sync.target", "==", target).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return false, fmt.Errorf("look up rows of target %s: %w", target, err)
	}
	return len(snaps) > 0, nil
}

// List returns up to limit judged targets, blind ones first.
func (s *Store) List(ctx context.Context, limit int) ([]ledger.Target, error) {
	snaps, err := s.client.Collection(ledger.TargetsCollection).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	var blind, seeing []ledger.Target
	for _, snap := range snaps {
		var t ledger.Target
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
