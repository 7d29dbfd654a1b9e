package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/gowebpki/jcs"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"google.golang.org/api/iterator"
)

// Task queues: task_queues/{queue}/tasks/{task_id}, each task with three append-only chains.
const (
	TaskQueuesCollection = "task_queues"
	TasksCollection      = "tasks"
	ChainStatuses        = "statuses"
	ChainReports         = "reports"
	ChainHeartbeats      = "heartbeats"
)

// Task statuses.
const (
	TaskNew     = "new"
	TaskWorking = "working"
	TaskDone    = "done"
	TaskFailed  = "failed"
)

// Task is a tasks document.
type Task struct {
	Queue          string    `firestore:"-"`
	ID             string    `firestore:"-"`
	Slug           string    `firestore:"slug"`
	Status         string    `firestore:"status"`
	WorkerID       string    `firestore:"worker_id,omitempty"`
	CreatedAt      time.Time `firestore:"created_at"`
	LastActivityAt time.Time `firestore:"last_activity_at"` // Firestore's time of the latest append
	StatusTip      string    `firestore:"status_tip"`
	ReportTip      string    `firestore:"report_tip"`
	HeartbeatTip   string    `firestore:"heartbeat_tip"`
	ReclaimCount   int64     `firestore:"reclaim_count"`
	FailureReason  string    `firestore:"failure_reason,omitempty"`

	// Malformed is set by a scan, instead of the fields above but ID and LastActivityAt, when the
	// document could not be decoded.
	Malformed string `firestore:"-"`
}

// Entry is one link of a chain. Its id is the SHA-256 of its canonical content (EntryID).
type Entry struct {
	ID        string         `firestore:"-"`
	CreatedAt time.Time      `firestore:"created_at"`
	Prev      string         `firestore:"prev"`
	Payload   map[string]any `firestore:"payload"`
}

// EntryTimeLayout is how an entry's created_at is written in the hashed object: RFC 3339 in UTC
// with exactly six fraction digits (Firestore keeps microseconds), e.g.
// 2026-12-01T18:27:45.907880Z and 2026-12-01T18:27:45.000000Z.
const EntryTimeLayout = "2006-01-02T15:04:05.000000Z"

// EntryID is an entry's id: the lowercase hex SHA-256 of the UTF-8 bytes of the RFC 8785 (JSON
// Canonicalization Scheme) form of the object
//
//	{"chain": CHAIN, "created_at": CREATED_AT, "payload": PAYLOAD, "prev": PREV, "task": TASK}
//
// where CHAIN is the chain's collection name (statuses, reports or heartbeats), CREATED_AT the
// entry's creation time truncated to the microsecond in EntryTimeLayout, PAYLOAD the entry's
// payload as stored, PREV the predecessor's id ("" for a chain's first entry) and TASK the task
// document's id. docs/data-model.md specifies it for writers in other languages, and
// docs/contract/chain-vectors.json holds vectors they can check against.
func EntryID(taskID, chain string, e Entry) (string, error) {
	b, err := canonicalJSON(map[string]any{
		"task": taskID, "chain": chain, "prev": e.Prev,
		"created_at": e.CreatedAt.UTC().Truncate(time.Microsecond).Format(EntryTimeLayout),
		"payload":    e.Payload,
	})
	if err != nil {
		return "", fmt.Errorf("entry id of a %s entry of task %s: %w", chain, taskID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalJSON is v in RFC 8785 form: keys sorted by UTF-16 code units, no whitespace, strings
// escaped only where JSON requires it (no \u003c for <, as encoding/json would write), numbers
// in ECMAScript's shortest form. A value JSON cannot hold (NaN, a channel) is an error.
func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// TaskStore is the task ledger.
type TaskStore struct {
	client *firestore.Client
	cfg    TxConfig
}

// NewTaskStore returns a store on client.
func NewTaskStore(client *firestore.Client, cfg TxConfig) *TaskStore {
	return &TaskStore{client: client, cfg: cfg.WithDefaults()}
}

func (s *TaskStore) queue(q string) *firestore.DocumentRef {
	return s.client.Collection(TaskQueuesCollection).Doc(q)
}

func (s *TaskStore) task(q, id string) *firestore.DocumentRef {
	return s.queue(q).Collection(TasksCollection).Doc(id)
}

func (s *TaskStore) tx(ctx context.Context, f func(context.Context, *firestore.Transaction) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.client.RunTransaction(ctx, f, firestore.MaxAttempts(s.cfg.MaxAttempts))
}

// appendEntry writes a new head of a chain after prev, which the caller has checked is the head
// in the same transaction.
func appendEntry(tx *firestore.Transaction, ref *firestore.DocumentRef, taskID, chain, prev string, at time.Time, payload map[string]any) (string, error) {
	e := Entry{CreatedAt: at.UTC().Truncate(time.Microsecond), Prev: prev, Payload: payload}
	id, err := EntryID(taskID, chain, e)
	if err != nil {
		return "", err
	}
	if err := tx.Create(ref.Collection(chain).Doc(id), e); err != nil {
		return "", err
	}
	return id, nil
}

// Chain returns a task's chain, head first (at most limit entries).
func (s *TaskStore) Chain(ctx context.Context, queue, id, chain string, limit int) ([]Entry, error) {
	r, err := s.Row(ctx, queue, id)
	if err == nil && r.Malformed != "" {
		err = fmt.Errorf("decode task %s/%s: %s", queue, id, r.Malformed)
	}
	if err != nil {
		return nil, err
	}
	t := r.Value
	tip := map[string]string{ChainStatuses: t.StatusTip, ChainReports: t.ReportTip, ChainHeartbeats: t.HeartbeatTip}[chain]
	var out []Entry
	for tip != "" && len(out) < limit {
		snap, err := s.task(queue, id).Collection(chain).Doc(tip).Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %s entry %s of %s/%s: %w", chain, tip, queue, id, err)
		}
		var e Entry
		if err := snap.DataTo(&e); err != nil {
			return nil, err
		}
		e.ID = tip
		out = append(out, e)
		tip = e.Prev
	}
	return out, nil
}

// ScanWorking returns up to limit working tasks of a queue, least recently active first, after
// the cursor. Tasks whose last_activity_at is not a timestamp cannot be judged by age and are
// never touched (Invisible).
func (s *TaskStore) ScanWorking(ctx context.Context, queue string, after *Cursor, limit int) ([]Task, error) {
	q := s.queue(queue).Collection(TasksCollection).
		Where("status", "==", TaskWorking).Where("last_activity_at", ">=", firestoreconn.MinTime).
		OrderBy("last_activity_at", firestore.Asc).OrderBy(firestore.DocumentID, firestore.Asc).
		Limit(limit)
	if after != nil {
		q = q.StartAfter(after.At, s.task(queue, after.ID))
	}
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("scan working tasks of %s: %w", queue, err)
	}
	out := make([]Task, 0, len(snaps))
	for _, snap := range snaps {
		var t Task
		if t.Malformed = decodeScanned(snap, &t); t.Malformed != "" {
			t.LastActivityAt = scannedTime(snap, "last_activity_at")
		}
		t.Queue, t.ID = queue, snap.Ref.ID
		out = append(out, t)
	}
	return out, nil
}

// CountTasks counts every task of a queue, whatever its status, with an aggregation query.
func (s *TaskStore) CountTasks(ctx context.Context, queue string) (int64, error) {
	return Count(ctx, s.queue(queue).Collection(TasksCollection).Query, "count tasks of "+queue)
}

// CountWorking counts a queue's working tasks with an aggregation query; with a `before` (not
// zero), the silent ones.
func (s *TaskStore) CountWorking(ctx context.Context, queue string, before time.Time) (int64, error) {
	q := s.queue(queue).Collection(TasksCollection).Where("status", "==", TaskWorking)
	return countBefore(ctx, q, "last_activity_at", before, "count working tasks of "+queue, "count silent tasks of "+queue)
}

// Count runs q as a count aggregation outside any transaction; what names it in the error.
func Count(ctx context.Context, q firestore.Query, what string) (int64, error) {
	return countIn(ctx, nil, q, what)
}

// countBefore counts the live rows q matches, or with a before those stale before it.
func countBefore(ctx context.Context, q firestore.Query, field string, before time.Time, all, stale string) (int64, error) {
	if before.IsZero() {
		return Count(ctx, q, all)
	}
	return Count(ctx, q.Where(field, "<", before), stale)
}

// ListQueues returns up to limit queue ids, including queues that have tasks but no document.
func (s *TaskStore) ListQueues(ctx context.Context, limit int) ([]string, error) {
	it := s.client.Collection(TaskQueuesCollection).DocumentRefs(ctx)
	it.PageInfo().MaxSize = min(limit, 300)
	var out []string
	for len(out) < limit {
		ref, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list task queues: %w", err)
		}
		out = append(out, ref.ID)
	}
	return out, nil
}

// Reclaim is what one reclaim did.
type Reclaim struct {
	Reclaimed bool
	StatusSHA string
	Poisoned  bool
	// Why says, when not reclaimed, why.
	Why   Left
	Pause *pausestore.Pause
}

// ReclaimPlan is what a reclaim's rule says of a task as its transaction re-reads it.
type ReclaimPlan struct {
	Left   Left
	Poison string
}

// ReclaimTask takes a working task back for reclaimer in one transaction that re-reads the task
// and the pauses and asks decide whether it still may: the preempt heartbeat is chained on the
// task's heartbeat head, so the old worker's fence fails from then on.
func (s *TaskStore) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(Task) ReclaimPlan) (Reclaim, error) {
	ref := s.task(queue, id)
	var out, tried Reclaim // tried: what the last attempt would have committed
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		out, tried = Reclaim{}, Reclaim{}
		t, plan, pause, err := s.planReclaim(tx, ref, pauses, decide)
		if err != nil || plan.Left != "" {
			out.Why, out.Pause = plan.Left, pause
			return err
		}
		hb, err := appendEntry(tx, ref, id, ChainHeartbeats, t.HeartbeatTip, now, map[string]any{"preempt": true, "reclaimer": reclaimer})
		if err != nil {
			return err
		}
		count := t.ReclaimCount + 1
		payload := map[string]any{"status": TaskNew, "reclaimed": true, "reclaimer": reclaimer, "reclaim_count": count}
		final := TaskNew
		u := []firestore.Update{}
		if plan.Poison != "" {
			final = TaskFailed
			payload["status"], payload["reason"] = TaskFailed, plan.Poison
			u = append(u, firestore.Update{Path: "failure_reason", Value: plan.Poison})
			out.Poisoned = true
		}
		st, err := appendEntry(tx, ref, id, ChainStatuses, t.StatusTip, now, payload)
		if err != nil {
			return err
		}
		out.Reclaimed, out.StatusSHA = true, st
		tried = out
		return tx.Update(ref, append(u,
			firestore.Update{Path: "status", Value: final},
			firestore.Update{Path: "worker_id", Value: firestore.Delete},
			firestore.Update{Path: "status_tip", Value: st},
			firestore.Update{Path: "heartbeat_tip", Value: hb},
			firestore.Update{Path: "reclaim_count", Value: count},
			firestore.Update{Path: "last_activity_at", Value: firestore.ServerTimestamp},
		))
	})
	if err != nil && firestoreconn.Ambiguous(err) && tried.Reclaimed && s.statusTipIs(ctx, queue, id, tried.StatusSHA) {
		return tried, nil
	}
	if err != nil {
		return Reclaim{}, fmt.Errorf("reclaim task %s/%s: %w", queue, id, err)
	}
	return out, nil
}

// statusTipIs resolves an ambiguous ReclaimTask by reading the task back. The reclaim status's
// id hashes this run's reclaimer and clock and its head, so no other reclaim has it.
func (s *TaskStore) statusTipIs(ctx context.Context, queue, id, sha string) bool {
	ctx, cancel := s.cfg.readBack(ctx)
	defer cancel()
	r, err := s.Row(ctx, queue, id)
	return err == nil && r.Value.StatusTip == sha
}

// PreviewReclaim is ReclaimTask in a dry run: the same reads and decision in a read-only
// transaction, nothing written.
func (s *TaskStore) PreviewReclaim(ctx context.Context, queue, id string, pauses []string, decide func(Task) ReclaimPlan) (Reclaim, error) {
	var out Reclaim
	err := readOnlyTx(ctx, s.client, s.cfg.Timeout, func(ctx context.Context, tx *firestore.Transaction) error {
		_, plan, pause, err := s.planReclaim(tx, s.task(queue, id), pauses, decide)
		out = Reclaim{Why: plan.Left, Pause: pause, Reclaimed: err == nil && plan.Left == "", Poisoned: err == nil && plan.Left == "" && plan.Poison != ""}
		return err
	})
	if err != nil {
		return Reclaim{}, fmt.Errorf("preview reclaiming task %s/%s: %w", queue, id, err)
	}
	return out, nil
}

func (s *TaskStore) planReclaim(tx *firestore.Transaction, ref *firestore.DocumentRef, pauses []string, decide func(Task) ReclaimPlan) (Task, ReclaimPlan, *pausestore.Pause, error) {
	snaps, err := tx.GetAll(append([]*firestore.DocumentRef{ref}, pauseRefs(s.client, pauses)...))
	if err != nil {
		return Task{}, ReclaimPlan{}, nil, err
	}
	if !snaps[0].Exists() {
		return Task{}, ReclaimPlan{Left: LeftTaskMissing}, nil, nil
	}
	var t Task
	if err := snaps[0].DataTo(&t); err != nil {
		return t, ReclaimPlan{}, nil, err
	}
	t.ID, t.Queue = ref.ID, ref.Parent.Parent.ID
	if p := pausestore.ActivePause(pausestore.DecodePauses(snaps[1:]), time.Now()); p != nil {
		return t, ReclaimPlan{Left: LeftPaused}, p, nil
	}
	return t, decide(t), nil, nil
}

func aggregateInt(v any) (int64, error) {
	switch x := v.(type) {
	case *firestorepb.Value:
		return x.GetIntegerValue(), nil
	case int64:
		return x, nil
	}
	return 0, fmt.Errorf("aggregation result %T is not an integer", v)
}
