package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The task lifecycle a worker runs: the reference writer of docs/writers.md, in Go. stalesweep
// never calls it in production (it only reclaims: ReclaimTask); the tests use it to write tasks
// exactly as a worker must.

// Enqueue adds a new task, with its first status, and makes sure its queue document exists.
func (s *TaskStore) Enqueue(ctx context.Context, queue, taskID, slug string, at time.Time) error {
	ref := s.task(queue, taskID)
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		qsnap, err := tx.Get(s.queue(queue))
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		tip, err := appendEntry(tx, ref, taskID, ChainStatuses, "", at, map[string]any{"status": TaskNew})
		if err != nil {
			return err
		}
		if qsnap == nil || !qsnap.Exists() {
			if err := tx.Set(s.queue(queue), map[string]any{"created_at": at}); err != nil {
				return err
			}
		}
		t := Task{Slug: slug, Status: TaskNew, CreatedAt: at, LastActivityAt: s.cfg.stampTime(), StatusTip: tip}
		if t.LastActivityAt.IsZero() {
			return tx.Create(ref, struct {
				Task
				LastActivityAt time.Time `firestore:"last_activity_at,serverTimestamp"`
			}{Task: t})
		}
		return tx.Create(ref, t)
	})
	if err != nil {
		return fmt.Errorf("enqueue task %s/%s: %w", queue, taskID, err)
	}
	return nil
}

// Next claims the oldest new task of the queue for worker, in a transaction that moves it to
// working only if it is still new, so two workers never claim the same task. The claim writes a
// working status and a heartbeat; the lease holds that heartbeat.
//
// Workers that reach for the oldest task at once queue on its lock (Firestore's transactions
// lock what they read). A candidate another worker has taken, or is taking (the claim aborted on
// contention after its retries, or ran out of time on the lock), is passed over for the next
// oldest, so a busy queue's workers fan out instead of failing. Only when every candidate was
// contended does Next fail, with ErrQueueBusy: the caller asks again.
func (s *TaskStore) Next(ctx context.Context, queue, worker string, at time.Time) (Lease, error) {
	snaps, err := s.queue(queue).Collection(TasksCollection).
		Where("status", "==", TaskNew).OrderBy("created_at", firestore.Asc).Limit(10).
		Documents(ctx).GetAll()
	if err != nil {
		return Lease{}, fmt.Errorf("next task of %s: %w", queue, err)
	}
	contended := 0
	for _, snap := range snaps {
		var lease Lease
		err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			t, err := readTask(tx, snap.Ref)
			if err != nil {
				return err
			}
			if t.Status != TaskNew {
				return ErrHeadMoved
			}
			st, err := appendEntry(tx, snap.Ref, t.ID, ChainStatuses, t.StatusTip, at, map[string]any{"status": TaskWorking, "worker_id": worker})
			if err != nil {
				return err
			}
			hb, err := appendEntry(tx, snap.Ref, t.ID, ChainHeartbeats, t.HeartbeatTip, at, map[string]any{"worker_id": worker, "claim": true})
			if err != nil {
				return err
			}
			lease = Lease{Queue: queue, TaskID: t.ID, WorkerID: worker, HeartbeatTip: hb}
			return tx.Update(snap.Ref, []firestore.Update{
				{Path: "status", Value: TaskWorking}, {Path: "worker_id", Value: worker},
				{Path: "status_tip", Value: st}, {Path: "heartbeat_tip", Value: hb},
				{Path: "last_activity_at", Value: s.cfg.stampAfter(t.LastActivityAt)},
			})
		})
		switch {
		case err == nil:
			return lease, nil
		case errors.Is(err, ErrHeadMoved):
			continue // another worker claimed it first
		case ctx.Err() == nil && lockContended(err):
			contended++ // another worker is claiming it: try the next
			continue
		default:
			return Lease{}, fmt.Errorf("claim task %s/%s: %w", queue, snap.Ref.ID, err)
		}
	}
	if contended > 0 {
		return Lease{}, fmt.Errorf("next task of %s: %d candidates contended: %w", queue, contended, ErrQueueBusy)
	}
	return Lease{}, ErrNoTask
}

// fenced runs f on the task of lease if the lease still holds it: the task is working and its
// heartbeat head is the lease's. Otherwise it fails with ErrHeadMoved and writes nothing.
func (s *TaskStore) fenced(ctx context.Context, lease Lease, f func(tx *firestore.Transaction, ref *firestore.DocumentRef, t Task) error) error {
	ref := s.task(lease.Queue, lease.TaskID)
	return s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		t, err := readTask(tx, ref)
		if err != nil {
			return err
		}
		if t.Status != TaskWorking || t.HeartbeatTip != lease.HeartbeatTip {
			return ErrHeadMoved
		}
		return f(tx, ref, t)
	})
}

// Heartbeat appends a heartbeat after the lease's and returns the lease on the new head.
func (s *TaskStore) Heartbeat(ctx context.Context, lease Lease, at time.Time) (Lease, error) {
	next := lease
	err := s.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t Task) error {
		hb, err := appendEntry(tx, ref, t.ID, ChainHeartbeats, t.HeartbeatTip, at, map[string]any{"worker_id": lease.WorkerID})
		if err != nil {
			return err
		}
		next.HeartbeatTip = hb
		return tx.Update(ref, []firestore.Update{{Path: "heartbeat_tip", Value: hb}, {Path: "last_activity_at", Value: s.cfg.stampAfter(t.LastActivityAt)}})
	})
	if err != nil {
		return lease, fmt.Errorf("heartbeat task %s/%s: %w", lease.Queue, lease.TaskID, err)
	}
	return next, nil
}

// Report appends a report, fenced on the lease.
func (s *TaskStore) Report(ctx context.Context, lease Lease, body string, at time.Time) (string, error) {
	var id string
	err := s.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t Task) error {
		var err error
		if id, err = appendEntry(tx, ref, t.ID, ChainReports, t.ReportTip, at, map[string]any{"worker_id": lease.WorkerID, "body": body}); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "report_tip", Value: id}, {Path: "last_activity_at", Value: s.cfg.stampAfter(t.LastActivityAt)}})
	})
	if err != nil {
		return "", fmt.Errorf("report on task %s/%s: %w", lease.Queue, lease.TaskID, err)
	}
	return id, nil
}

// Complete ends the task done, fenced on the lease.
func (s *TaskStore) Complete(ctx context.Context, lease Lease, at time.Time) error {
	return s.finish(ctx, lease, TaskDone, "", at)
}

// Fail ends the task failed with a reason, fenced on the lease.
func (s *TaskStore) Fail(ctx context.Context, lease Lease, reason string, at time.Time) error {
	return s.finish(ctx, lease, TaskFailed, reason, at)
}

func (s *TaskStore) finish(ctx context.Context, lease Lease, final, reason string, at time.Time) error {
	err := s.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t Task) error {
		payload := map[string]any{"status": final, "worker_id": lease.WorkerID}
		if reason != "" {
			payload["reason"] = reason
		}
		st, err := appendEntry(tx, ref, t.ID, ChainStatuses, t.StatusTip, at, payload)
		if err != nil {
			return err
		}
		u := []firestore.Update{
			{Path: "status", Value: final}, {Path: "status_tip", Value: st},
			{Path: "last_activity_at", Value: s.cfg.stampAfter(t.LastActivityAt)},
		}
		if reason != "" {
			u = append(u, firestore.Update{Path: "failure_reason", Value: reason})
		}
		return tx.Update(ref, u)
	})
	if err != nil {
		return fmt.Errorf("%s task %s/%s: %w", final, lease.Queue, lease.TaskID, err)
	}
	return nil
}
