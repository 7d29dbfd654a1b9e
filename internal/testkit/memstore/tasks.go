package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Tasks is the task queues' ledger in memory: pmsweep.Store, as *ledger.TaskStore is.
type Tasks struct {
	Hooks
	Pauses

	mu        sync.Mutex
	tasks     map[string]map[string]ledger.Task // by queue, then id
	invisible map[string]map[string]bool        // working, last_activity_at not a timestamp
}

// NewTasks returns an empty store.
func NewTasks() *Tasks {
	return &Tasks{tasks: map[string]map[string]ledger.Task{}, invisible: map[string]map[string]bool{}}
}

// Put writes t into its queue as it is. With Malformed set it stands for a document that does
// not decode: only its ID, Status and LastActivityAt are readable.
func (s *Tasks) Put(t ledger.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tasks[t.Queue] == nil {
		s.tasks[t.Queue] = map[string]ledger.Task{}
	}
	s.tasks[t.Queue][t.ID] = t
}

// PutInvisible writes a working task whose last_activity_at is missing or not a timestamp.
func (s *Tasks) PutInvisible(queue, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.invisible[queue] == nil {
		s.invisible[queue] = map[string]bool{}
	}
	s.invisible[queue][id] = true
}

// Heartbeat records a worker's heartbeat on a working task at `at`: a new heartbeat tip, and
// the task's last activity.
func (s *Tasks) Heartbeat(queue, id, tip string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[queue][id]; ok && t.Status == ledger.TaskWorking {
		t.HeartbeatTip, t.LastActivityAt = tip, at
		s.tasks[queue][id] = t
	}
}

// Get reads a task.
func (s *Tasks) Get(queue, id string) (ledger.Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[queue][id]
	return t, ok
}

func (s *Tasks) working(queue string) []ledger.Task {
	var out []ledger.Task
	for _, t := range s.tasks[queue] {
		if t.Status == ledger.TaskWorking {
			out = append(out, t)
		}
	}
	return out
}

// ScanWorking is TaskStore.ScanWorking.
func (s *Tasks) ScanWorking(ctx context.Context, queue string, after *ledger.Cursor, limit int) ([]ledger.Task, error) {
	if err := s.enter(ctx, "ScanWorking", ""); err != nil {
		return nil, fmt.Errorf("scan working tasks of %s: %w", queue, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var from *key
	if after != nil {
		from = &key{after.At, after.ID}
	}
	out := page(s.working(queue), func(t ledger.Task) key { return key{t.LastActivityAt, t.ID} }, from, limit)
	for i, t := range out {
		if t.Malformed != "" {
			out[i] = ledger.Task{Queue: queue, ID: t.ID, LastActivityAt: t.LastActivityAt, Malformed: t.Malformed}
		}
	}
	return out, nil
}

// CountTasks is TaskStore.CountTasks: every task, whatever its status, invisible ones too.
func (s *Tasks) CountTasks(ctx context.Context, queue string) (int64, error) {
	if err := s.enter(ctx, "CountTasks", ""); err != nil {
		return 0, fmt.Errorf("count tasks of %s: %w", queue, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.tasks[queue]) + len(s.invisible[queue])), nil
}

// CountWorking is TaskStore.CountWorking: invisible tasks are working too, and never silent.
func (s *Tasks) CountWorking(ctx context.Context, queue string, before time.Time) (int64, error) {
	if err := s.enter(ctx, "CountWorking", ""); err != nil {
		return 0, fmt.Errorf("%s of %s: %w", countWhat(before, "count working tasks", "count silent tasks"), queue, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if before.IsZero() {
		return int64(len(s.working(queue)) + len(s.invisible[queue])), nil
	}
	var n int64
	for _, t := range s.working(queue) {
		if t.LastActivityAt.Before(before) {
			n++
		}
	}
	return n, nil
}

// Invisible is TaskStore.Invisible.
func (s *Tasks) Invisible(ctx context.Context, queue string) (ledger.Invisible, error) {
	if err := s.enter(ctx, "Invisible", ""); err != nil {
		return ledger.Invisible{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.invisible[queue] {
		ids = append(ids, id)
	}
	return invisible(ids), nil
}

// ReclaimTask is TaskStore.ReclaimTask, with its fence: the task must still be working, with
// the heartbeat tip and the last activity the sweep saw. It appends the preempt heartbeat and
// the reclaim status (their ids computed as the ledger computes them) and requeues the task, or
// fails it as poison past maxReclaims (0: no cap). Last activity becomes now, never earlier. A
// pause of pauses that holds leaves the task (ledger.LeftPaused).
func (s *Tasks) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	if err := s.settling(ctx, "ReclaimTask", id); err != nil {
		return ledger.Reclaim{}, fmt.Errorf("reclaim task %s/%s: %w", queue, id, err)
	}
	return s.reclaim(queue, id, reclaimer, pauses, now, decide, false)
}

// PreviewReclaim is TaskStore.PreviewReclaim: ReclaimTask's read and decision, and no write.
func (s *Tasks) PreviewReclaim(ctx context.Context, queue, id string, pauses []string, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	if err := s.enter(ctx, "PreviewReclaim", id); err != nil {
		return ledger.Reclaim{}, fmt.Errorf("preview reclaiming task %s/%s: %w", queue, id, err)
	}
	return s.reclaim(queue, id, "", pauses, time.Time{}, decide, true)
}

// reclaim is ReclaimTask's critical section; a preview decides and writes nothing.
func (s *Tasks) reclaim(queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan, preview bool) (ledger.Reclaim, error) {
	fail := func(err error) (ledger.Reclaim, error) {
		return ledger.Reclaim{}, fmt.Errorf("reclaim task %s/%s: %w", queue, id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[queue][id]
	switch {
	case !ok:
		return ledger.Reclaim{Why: ledger.LeftTaskMissing}, nil
	case t.Malformed != "":
		return fail(fmt.Errorf("decode: %s", t.Malformed))
	}
	if p := s.holding(pauses); p != nil {
		return ledger.Reclaim{Why: ledger.LeftPaused, Pause: p}, nil
	}
	plan := decide(t)
	if plan.Left != "" {
		return ledger.Reclaim{Why: plan.Left}, nil
	}
	if preview {
		return ledger.Reclaim{Reclaimed: true, Poisoned: plan.Poison != ""}, nil
	}
	at := now.UTC().Truncate(time.Microsecond)
	hb, err := ledger.EntryID(id, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: at, Prev: t.HeartbeatTip,
		Payload: map[string]any{"preempt": true, "reclaimer": reclaimer}})
	if err != nil {
		return fail(err)
	}
	var out ledger.Reclaim
	count := t.ReclaimCount + 1
	payload := map[string]any{"status": ledger.TaskNew, "reclaimed": true, "reclaimer": reclaimer, "reclaim_count": count}
	t.Status = ledger.TaskNew
	if plan.Poison != "" {
		t.Status = ledger.TaskFailed
		t.FailureReason = plan.Poison
		payload["status"], payload["reason"] = ledger.TaskFailed, t.FailureReason
		out.Poisoned = true
	}
	st, err := ledger.EntryID(id, ledger.ChainStatuses, ledger.Entry{CreatedAt: at, Prev: t.StatusTip, Payload: payload})
	if err != nil {
		return fail(err)
	}
	t.WorkerID, t.StatusTip, t.HeartbeatTip, t.ReclaimCount = "", st, hb, count
	if now.After(t.LastActivityAt) {
		t.LastActivityAt = now
	}
	s.tasks[queue][id] = t
	out.Reclaimed, out.StatusSHA = true, st
	return out, nil
}
