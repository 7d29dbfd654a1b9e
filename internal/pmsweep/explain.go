package pmsweep

import (
	"context"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Rows is what Explain needs besides the sweep's Store; *ledger.TaskStore has it.
type Rows interface {
	Row(ctx context.Context, queue, id string) (ledger.Row[ledger.Task], error)
	Chain(ctx context.Context, queue, id, chain string, limit int) ([]ledger.Entry, error)
}

// Explain says what a sweep of queue with the seed's default TTL (TTLDefault) would do with one
// task now, and why. It writes nothing.
func (w *Workflow) Explain(ctx context.Context, rows Rows, queue, id string, _ explain.Options) (explain.Explanation, error) {
	e := explain.Explanation{Collection: ledger.TaskQueuesCollection + "/" + queue + "/" + ledger.TasksCollection, ID: id,
		WorkflowType: string(Declared.Type), Scope: queue}
	row, now, err := agesweep.Explaining(ctx, &e, w.Clock, func(ctx context.Context, id string) (ledger.Row[ledger.Task], error) {
		return rows.Row(ctx, queue, id)
	})
	if err != nil {
		return e, err
	}
	t := row.Value
	ttl := time.Duration(TTLDefault) * time.Second
	stamped := row.HasTimestamp(scan.Field)
	// A task that does not decode has no silence to judge: its decoded last_activity_at is the
	// zero time, whatever the document holds.
	silent := fmt.Sprintf("silence cannot be judged: no heartbeat (last_activity_at is not a timestamp); ttl %ds (the seed's default)", TTLDefault)
	switch {
	case stamped && row.Malformed != "":
		silent = fmt.Sprintf("silence cannot be judged: the task does not decode; ttl %ds (the seed's default)", TTLDefault)
	case stamped:
		silent = fmt.Sprintf("silent %s against ttl %ds (the seed's default)", now.Sub(t.LastActivityAt).Truncate(time.Millisecond), TTLDefault)
	}
	stale := stamped && row.Malformed == "" && Stale(t, now, ttl)
	valid, decodes := scan.Checks(row.Fields, stamped, row.Malformed)
	e.Checks = []explain.Check{
		{Name: "status working", OK: row.Fields["status"] == ledger.TaskWorking, Detail: fmt.Sprintf("status %q; the scan reads working tasks only", row.Fields["status"])},
		valid, decodes,
		{Name: "silent past ttl", OK: stale, Detail: silent},
	}
	e.Decided()
	if t.ReclaimCount > 0 || t.FailureReason != "" {
		e.Last = map[string]any{"reclaim_count": t.ReclaimCount}
		if t.FailureReason != "" {
			e.Last["failure_reason"] = t.FailureReason
		}
		if head, err := rows.Chain(ctx, queue, id, ledger.ChainStatuses, 1); err == nil && len(head) == 1 && head[0].Payload["reclaimed"] == true {
			e.Last["status_head"] = map[string]any{"id": head[0].ID, "created_at": head[0].CreatedAt, "payload": head[0].Payload}
		}
	}
	switch {
	case scan.Skipped(&e, stamped, row.Malformed):
		return e, nil
	case t.Status != ledger.TaskWorking:
		e.Verdict, e.Rule = "skip", string(LeftNotWorking)
		return e, nil
	case !stale:
		e.Verdict, e.Rule, e.Detail = "skip", "not_stale", "silent for at most the TTL: its worker may be alive"
		return e, nil
	}
	res, err := w.Store.PreviewReclaim(ctx, queue, id, nil, Reclaimable(t, w.Config.MaxReclaims))
	switch {
	case err != nil:
		return e, err
	case res.Poisoned:
		e.Verdict, e.Outcome, e.Rule = "fail_as_poison", ledger.TaskFailed, "max_reclaims"
		e.Detail = fmt.Sprintf("reclaimed %d times already: failed instead of requeued (more than %d)", t.ReclaimCount, w.Config.MaxReclaims)
	case res.Reclaimed:
		e.Verdict, e.Outcome, e.Rule = "reclaim", ledger.TaskNew, "silent_past_ttl"
		e.Detail = "a preempt heartbeat on the heartbeat head, then a reclaim status: requeued as new"
	default:
		e.Verdict, e.Rule = "keep", string(res.Why)
	}
	return e, nil
}

var scan = agesweep.Scan{Field: "last_activity_at", Noun: "task", Settler: "sweep", Settles: "reclaims"}
