package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"
)

// Invisible is what a scope holds that no scan can see: active rows whose staleness field is
// missing or is not a timestamp (a string, a number: a foreign writer's mistake). Every scan
// filters and orders on that field, and Firestore's range filters match only values of the
// filter's own type, so such a row is active forever and no scan, count or guard returns it.
// They are counted and reported, never settled.
type Invisible struct {
	Count int64 `json:"count"`
	// Sample holds up to InvisibleSampleMax of their ids, found among the first
	// InvisibleScanMax active rows by id; it may miss some when the scope has more.
	Sample []string `json:"sample,omitempty"`
}

// Stat is v for a run's stats: nil when nothing is invisible.
func (v Invisible) Stat() *Invisible {
	if v.Count == 0 {
		return nil
	}
	return &v
}

// Bounds of the sample of invisible rows.
const (
	InvisibleSampleMax = 10
	InvisibleScanMax   = 200
	// InvisibleCountAttempts bounds how many times a moving scope is counted again.
	InvisibleCountAttempts = 3
)

// firestoreMinTime is the earliest timestamp Firestore stores: every timestamp is at or after it.
var firestoreMinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// invisible counts the documents active matches, against those of them whose field holds a
// timestamp (served by the index that serves the scan), and, when they differ, reads a bounded
// sample of the scope to name them. The counts are not one snapshot (Firestore has no read time
// for aggregations, and a read-only transaction would commit): a row settled or created between
// them would read as invisible. So the scope is counted on both sides of the timestamp count,
// again (up to InvisibleCountAttempts times) while it moves, and a difference is confirmed by the
// sample: when the sample read the whole scope, the count is what it found. It costs three
// aggregation queries, and a bounded read only when something looks invisible.
func invisible(ctx context.Context, active firestore.Query, field, what string) (Invisible, error) {
	var estimate int64
	stable := false
	for range InvisibleCountAttempts {
		before, err := count(ctx, active, "count active "+what)
		if err != nil {
			return Invisible{}, err
		}
		seen, err := count(ctx, active.Where(field, ">=", firestoreMinTime), "count active "+what+" with a timestamp "+field)
		if err != nil {
			return Invisible{}, err
		}
		after, err := count(ctx, active, "count active "+what)
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
	snaps, err := active.OrderBy(firestore.DocumentID, firestore.Asc).Limit(InvisibleScanMax).Documents(ctx).GetAll()
	if err != nil {
		return Invisible{}, fmt.Errorf("sample invisible %s: %w", what, err)
	}
	var found []string
	for _, snap := range snaps {
		if v, err := snap.DataAt(field); err != nil || !isTime(v) {
			found = append(found, snap.Ref.ID)
		}
	}
	out := Invisible{Count: max(estimate, int64(len(found))), Sample: found[:min(len(found), InvisibleSampleMax)]}
	if len(snaps) < InvisibleScanMax {
		out.Count = int64(len(found)) // the sample read the whole scope: what it found is exact
	}
	return out, nil
}

func isTime(v any) bool {
	_, ok := v.(time.Time)
	return ok
}

// Invisible reports the active rows of one organization and provider that no scan can see:
// observed_at missing or not a timestamp.
func (s *ExecutionStore) Invisible(ctx context.Context, org, provider string) (Invisible, error) {
	q := s.client.Collection(ExecutionsCollection).
		Where("organization_uuid", "==", org).Where("provider", "==", provider).Where("active", "==", true)
	return invisible(ctx, q, "observed_at", "executions of "+org)
}

// Invisible reports the running app invocations no scan can see: last_moved_at missing or not a
// timestamp.
func (s *ExtensionRunStore) Invisible(ctx context.Context) (Invisible, error) {
	q := s.client.Collection(ExtensionRunsCollection).Where("status", "==", ExtensionRunning)
	return invisible(ctx, q, "last_moved_at", "extension runs")
}

// Invisible reports a queue's working tasks no scan can see: last_activity_at missing or not a
// timestamp.
func (s *TaskStore) Invisible(ctx context.Context, queue string) (Invisible, error) {
	q := s.queue(queue).Collection(TasksCollection).Where("status", "==", TaskWorking)
	return invisible(ctx, q, "last_activity_at", "tasks of "+queue)
}

// Invisible reports a runner group's active leases no scan can see: heartbeat_at missing or not
// a timestamp.
func (s *LeaseStore) Invisible(ctx context.Context, org, group string) (Invisible, error) {
	return invisible(ctx, s.active(org, group), "heartbeat_at", "leases of group "+group)
}

// ReportInvisible logs what a count of invisible rows found (v, err) — WARNING naming the
// collection, the field a writer must stamp, and a sample of ids — and returns it for a run's
// stats. A failed count is logged, not fatal: it is a report, not a rule, and reads as nothing.
func ReportInvisible(log *slog.Logger, collection, field string, v Invisible, err error) *Invisible {
	switch {
	case err != nil:
		log.Warn("could not count the active rows no scan can see", "collection", collection, "error", err.Error())
		return nil
	case v.Count > 0:
		log.Warn("active rows no scan can see: their "+field+" is missing or not a timestamp; a writer must stamp it (docs/data-model.md); they are never settled",
			"collection", collection, "invisible", v.Count, "sample", v.Sample)
	}
	return v.Stat()
}
