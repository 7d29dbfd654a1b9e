package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// ErrHeadMoved is an append whose expected predecessor is no longer its chain's head: another
// writer got there first. For a worker it means it no longer holds its task.
var ErrHeadMoved = errors.New("head moved")

// ErrNoTask is Next finding no task to claim.
var ErrNoTask = errors.New("no new task in the queue")

// ErrQueueBusy is Next finding new tasks but every one of them being claimed by other workers
// at that moment: try again.
var ErrQueueBusy = errors.New("every candidate task is being claimed by another worker")

// Lease is what a worker holds on a claimed task: the heartbeat chain's tip after its last
// write. Every write it makes is fenced on it.
type Lease struct {
	Queue        string
	TaskID       string
	WorkerID     string
	HeartbeatTip string
}

// Tasks writes the task lifecycle a worker runs.
type Tasks struct {
	Client *firestore.Client
	Now    func() time.Time // stands in for the server timestamp of last_activity_at; nil: none
}

func (w Tasks) queue(q string) *firestore.DocumentRef {
	return w.Client.Collection(ledger.TaskQueuesCollection).Doc(q)
}

func (w Tasks) task(q, id string) *firestore.DocumentRef {
	return w.queue(q).Collection(ledger.TasksCollection).Doc(id)
}

// appendEntry writes a new head of a chain after prev (which the caller has checked is the
// head, in the same transaction) and returns its id.
func appendEntry(tx *firestore.Transaction, ref *firestore.DocumentRef, chain, prev string, at time.Time, payload map[string]any) (string, error) {
	e := ledger.Entry{CreatedAt: at.UTC().Truncate(time.Microsecond), Prev: prev, Payload: payload}
	id, err := ledger.EntryID(ref.ID, chain, e)
	if err != nil {
		return "", err
	}
	if err := tx.Create(ref.Collection(chain).Doc(id), e); err != nil {
		return "", err
	}
	return id, nil
}

func readTask(tx *firestore.Transaction, ref *firestore.DocumentRef) (ledger.Task, error) {
	snap, err := tx.Get(ref)
	if err != nil {
		return ledger.Task{}, err
	}
	var t ledger.Task
	if err := snap.DataTo(&t); err != nil {
		return ledger.Task{}, err
	}
	t.ID, t.Queue = ref.ID, ref.Parent.Parent.ID
	return t, nil
}

// Enqueue adds a new task, with its first status, and makes sure its queue document exists.
func (w Tasks) Enqueue(ctx context.Context, queue, taskID, slug string, at time.Time) error {
	ref := w.task(queue, taskID)
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		qsnap, err := tx.Get(w.queue(queue))
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		tip, err := appendEntry(tx, ref, ledger.ChainStatuses, "", at, map[string]any{"status": ledger.TaskNew})
		if err != nil {
			return err
		}
		if qsnap == nil || !qsnap.Exists() {
			if err := tx.Set(w.queue(queue), map[string]any{"created_at": at}); err != nil {
				return err
			}
		}
		t := ledger.Task{Slug: slug, Status: ledger.TaskNew, CreatedAt: at, StatusTip: tip}
		if w.Now != nil {
			t.LastActivityAt = w.Now().UTC()
			return tx.Create(ref, t)
		}
		return tx.Create(ref, struct {
			ledger.Task
			LastActivityAt time.Time `firestore:"last_activity_at,serverTimestamp"`
		}{Task: t})
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
func (w Tasks) Next(ctx context.Context, queue, worker string, at time.Time) (Lease, error) {
	snaps, err := w.queue(queue).Collection(ledger.TasksCollection).
		Where("status", "==", ledger.TaskNew).OrderBy("created_at", firestore.Asc).Limit(10).
		Documents(ctx).GetAll()
	if err != nil {
		return Lease{}, fmt.Errorf("next task of %s: %w", queue, err)
	}
	contended := 0
	for _, snap := range snaps {
		var lease Lease
		err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
			t, err := readTask(tx, snap.Ref)
			if err != nil {
				return err
			}
			if t.Status != ledger.TaskNew {
				return ErrHeadMoved
			}
			st, err := appendEntry(tx, snap.Ref, ledger.ChainStatuses, t.StatusTip, at, map[string]any{"status": ledger.TaskWorking, "worker_id": worker})
			if err != nil {
				return err
			}
			hb, err := appendEntry(tx, snap.Ref, ledger.ChainHeartbeats, t.HeartbeatTip, at, map[string]any{"worker_id": worker, "claim": true})
			if err != nil {
				return err
			}
			lease = Lease{Queue: queue, TaskID: t.ID, WorkerID: worker, HeartbeatTip: hb}
			return tx.Update(snap.Ref, []firestore.Update{
				{Path: "status", Value: ledger.TaskWorking}, {Path: "worker_id", Value: worker},
				{Path: "status_tip", Value: st}, {Path: "heartbeat_tip", Value: hb},
				{Path: "last_activity_at", Value: stamp(w.Now)},
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

// lockContended reports whether a claim failed on another transaction's lock: aborted on
// contention after its retries, or out of time waiting (the caller's context still live).
func lockContended(err error) bool {
	c := status.Code(err)
	return c == codes.Aborted || c == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// fenced runs f on the task of lease if the lease still holds it: the task is working and its
// heartbeat head is the lease's. Otherwise it fails with ErrHeadMoved and writes nothing.
func (w Tasks) fenced(ctx context.Context, lease Lease, f func(tx *firestore.Transaction, ref *firestore.DocumentRef, t ledger.Task) error) error {
	ref := w.task(lease.Queue, lease.TaskID)
	return runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		t, err := readTask(tx, ref)
		if err != nil {
			return err
		}
		if t.Status != ledger.TaskWorking || t.HeartbeatTip != lease.HeartbeatTip {
			return ErrHeadMoved
		}
		return f(tx, ref, t)
	})
}

// Heartbeat appends a heartbeat after the lease's and returns the lease on the new head.
func (w Tasks) Heartbeat(ctx context.Context, lease Lease, at time.Time) (Lease, error) {
	next := lease
	err := w.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t ledger.Task) error {
		hb, err := appendEntry(tx, ref, ledger.ChainHeartbeats, t.HeartbeatTip, at, map[string]any{"worker_id": lease.WorkerID})
		if err != nil {
			return err
		}
		next.HeartbeatTip = hb
		return tx.Update(ref, []firestore.Update{{Path: "heartbeat_tip", Value: hb}, {Path: "last_activity_at", Value: stamp(w.Now)}})
	})
	if err != nil {
		return lease, fmt.Errorf("heartbeat task %s/%s: %w", lease.Queue, lease.TaskID, err)
	}
	return next, nil
}

// Report appends a report, fenced on the lease.
func (w Tasks) Report(ctx context.Context, lease Lease, body string, at time.Time) (string, error) {
	var id string
	err := w.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t ledger.Task) error {
		var err error
		if id, err = appendEntry(tx, ref, ledger.ChainReports, t.ReportTip, at, map[string]any{"worker_id": lease.WorkerID, "body": body}); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "report_tip", Value: id}, {Path: "last_activity_at", Value: stamp(w.Now)}})
	})
	if err != nil {
		return "", fmt.Errorf("report on task %s/%s: %w", lease.Queue, lease.TaskID, err)
	}
	return id, nil
}

// Complete ends the task done, fenced on the lease.
func (w Tasks) Complete(ctx context.Context, lease Lease, at time.Time) error {
	return w.finish(ctx, lease, ledger.TaskDone, "", at)
}

// Fail ends the task failed with a reason, fenced on the lease.
func (w Tasks) Fail(ctx context.Context, lease Lease, reason string, at time.Time) error {
	return w.finish(ctx, lease, ledger.TaskFailed, reason, at)
}

func (w Tasks) finish(ctx context.Context, lease Lease, final, reason string, at time.Time) error {
	err := w.fenced(ctx, lease, func(tx *firestore.Transaction, ref *firestore.DocumentRef, t ledger.Task) error {
		payload := map[string]any{"status": final, "worker_id": lease.WorkerID}
		if reason != "" {
			payload["reason"] = reason
		}
		st, err := appendEntry(tx, ref, ledger.ChainStatuses, t.StatusTip, at, payload)
		if err != nil {
			return err
		}
		u := []firestore.Update{
			{Path: "status", Value: final}, {Path: "status_tip", Value: st},
			{Path: "last_activity_at", Value: stamp(w.Now)},
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
