package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
)

// Invisible is what a scope holds that no scan can see: active rows whose staleness field is
// missing or not a timestamp. Firestore's range filters match only values of the filter's own
// type, so such a row is active forever and no scan, count or guard returns it.
type Invisible struct {
	Count int64 `json:"count"`
	// Sample holds up to InvisibleSampleMax of their ids; it may miss some when the scope is large.
	Sample []string `json:"sample,omitempty"`
}

// Bounds of the sample of invisible rows.
const (
	InvisibleSampleMax = 10
	invisibleScanMax   = 200
)

// invisible counts the documents active matches against those whose field holds a timestamp,
// and samples the scope when they differ. The counts are not one snapshot, so the scope is
// counted on both sides of the timestamp count, again while it moves, and a difference is
// confirmed by the sample.
func invisible(ctx context.Context, active firestore.Query, field, what string) (Invisible, error) {
	var estimate int64
	stable := false
	for range invisibleCountAttempts {
		before, err := Count(ctx, active, "count active "+what)
		if err != nil {
			return Invisible{}, err
		}
		seen, err := Count(ctx, active.Where(field, ">=", firestoreconn.MinTime), "count active "+what+" with a timestamp "+field)
		if err != nil {
			return Invisible{}, err
		}
		after, err := Count(ctx, active, "count active "+what)
		if err != nil {
			return Invisible{}, err
		}
		if before == after {
			estimate, stable = max(after-seen, 0), true
			break
		}
	}
	if !stable {
		return Invisible{}, fmt.Errorf("count invisible %s: the scope kept changing while it was counted", what)
	}
	if estimate == 0 {
		return Invisible{}, nil
	}
	snaps, err := active.OrderBy(firestore.DocumentID, firestore.Asc).Limit(invisibleScanMax).Documents(ctx).GetAll()
	if err != nil {
		return Invisible{}, fmt.Errorf("sample invisible %s: %w", what, err)
	}
	found := notTimestamps(snaps, field)
	out := Invisible{Count: max(estimate, int64(len(found))), Sample: found[:min(len(found), InvisibleSampleMax)]}
	if len(snaps) < invisibleScanMax {
		out.Count = int64(len(found)) // the sample read the whole scope: what it found is exact
	}
	return out, nil
}

// invisibleCountAttempts bounds how many times invisible counts a moving scope again.
const invisibleCountAttempts = 3

// invisibleSnapshot is invisible in one read-only transaction, for the execution syncs, which
// count beside their own writes. Against Firestore a read-only transaction takes no lock; the
// emulator's holds the documents it counted until it ends, which is why the workflows that
// count before they write use invisible.
func invisibleSnapshot(ctx context.Context, client *firestore.Client, active firestore.Query, field, what string) (Invisible, error) {
	var out Invisible
	err := client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		out = Invisible{}
		all, err := countIn(ctx, tx, active, "count active "+what)
		if err != nil {
			return err
		}
		seen, err := countIn(ctx, tx, active.Where(field, ">=", firestoreconn.MinTime), "count active "+what+" with a timestamp "+field)
		if err != nil {
			return err
		}
		if all <= seen {
			return nil
		}
		snaps, err := tx.Documents(active.OrderBy(firestore.DocumentID, firestore.Asc).Limit(invisibleScanMax)).GetAll()
		if err != nil {
			return fmt.Errorf("sample invisible %s: %w", what, err)
		}
		found := notTimestamps(snaps, field)
		out = Invisible{Count: all - seen, Sample: found[:min(len(found), InvisibleSampleMax)]}
		return nil
	}, firestore.ReadOnly)
	return out, err
}

func notTimestamps(snaps []*firestore.DocumentSnapshot, field string) []string {
	var found []string
	for _, snap := range snaps {
		if v, err := snap.DataAt(field); err != nil || !isTime(v) {
			found = append(found, snap.Ref.ID)
		}
	}
	return found
}

func countIn(ctx context.Context, tx *firestore.Transaction, q firestore.Query, what string) (int64, error) {
	agg := q.NewAggregationQuery().WithCount("n")
	if tx != nil {
		agg = agg.Transaction(tx)
	}
	res, err := agg.Get(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	n, err := aggregateInt(res["n"])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// Invisible reports the active rows of one organization and provider that no scan can see.
func (s *ExecutionStore) Invisible(ctx context.Context, org, provider string) (Invisible, error) {
	q := s.client.Collection(ExecutionsCollection).
		Where("organization_uuid", "==", org).Where("provider", "==", provider).Where("active", "==", true)
	return invisibleSnapshot(ctx, s.client, q, "observed_at", "executions of "+org)
}

// Invisible reports the running app invocations no scan can see.
func (s *ExtensionRunStore) Invisible(ctx context.Context) (Invisible, error) {
	q := s.client.Collection(ExtensionRunsCollection).Where("status", "==", ExtensionRunning)
	return invisible(ctx, q, "last_moved_at", "extension runs")
}

// Invisible reports a queue's working tasks no scan can see.
func (s *TaskStore) Invisible(ctx context.Context, queue string) (Invisible, error) {
	q := s.queue(queue).Collection(TasksCollection).Where("status", "==", TaskWorking)
	return invisible(ctx, q, "last_activity_at", "tasks of "+queue)
}

// Invisible reports a runner group's active leases no scan can see.
func (s *LeaseStore) Invisible(ctx context.Context, org, group string) (Invisible, error) {
	return invisible(ctx, s.active(org, group), "heartbeat_at", "leases of group "+group)
}

func isTime(v any) bool {
	_, ok := v.(time.Time)
	return ok
}
