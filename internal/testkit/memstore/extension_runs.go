package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// ExtensionRuns is the app invocations' ledger in memory: runssweep.Store, as
// *ledger.ExtensionRunStore is.
type ExtensionRuns struct {
	Hooks
	Pauses

	mu         sync.Mutex
	runs       map[string]ledger.ExtensionRun
	invisible  map[string]bool // running, last_moved_at not a timestamp
	interlocks map[string]ledger.Interlock
}

// NewExtensionRuns returns an empty store.
func NewExtensionRuns() *ExtensionRuns {
	return &ExtensionRuns{runs: map[string]ledger.ExtensionRun{}, invisible: map[string]bool{}, interlocks: map[string]ledger.Interlock{}}
}

// Put writes r as it is. With Malformed set it stands for a document that does not decode: only
// its RunID, Status and LastMovedAt are readable.
func (s *ExtensionRuns) Put(r ledger.ExtensionRun) { put(&s.mu, s.runs, r.RunID, r) }

// PutInvisible writes a running run whose last_moved_at is missing or not a timestamp.
func (s *ExtensionRuns) PutInvisible(runID string) { put(&s.mu, s.invisible, runID, true) }

// PutInterlock writes the interlock of a tenant's extension, naming runID.
func (s *ExtensionRuns) PutInterlock(tenantID, extensionID, runID string) {
	put(&s.mu, s.interlocks, ledger.InterlockID(tenantID, extensionID), ledger.Interlock{RunID: runID})
}

// Move records that a running run moved at `at`, as ledgertest.ExtensionRuns.Move does.
func (s *ExtensionRuns) Move(runID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[runID]; ok && r.Status == ledger.ExtensionRunning {
		r.LastMovedAt = at
		s.runs[runID] = r
	}
}

// Get reads a run.
func (s *ExtensionRuns) Get(runID string) (ledger.ExtensionRun, bool) {
	return get(&s.mu, s.runs, runID)
}

// Interlock reads the interlock of a tenant's extension.
func (s *ExtensionRuns) Interlock(tenantID, extensionID string) (ledger.Interlock, bool) {
	return get(&s.mu, s.interlocks, ledger.InterlockID(tenantID, extensionID))
}

// idle lists the running runs last moved before deadline.
func (s *ExtensionRuns) idle(deadline time.Time) []ledger.ExtensionRun {
	var out []ledger.ExtensionRun
	for _, r := range s.runs {
		if r.Status == ledger.ExtensionRunning && r.LastMovedAt.Before(deadline) {
			out = append(out, r)
		}
	}
	return out
}

// ScanIdle is ExtensionRunStore.ScanIdle.
func (s *ExtensionRuns) ScanIdle(ctx context.Context, deadline time.Time, after *ledger.Cursor, limit int) ([]ledger.ExtensionRun, error) {
	if err := s.enter(ctx, "ScanIdle", ""); err != nil {
		return nil, fmt.Errorf("scan idle extension runs: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var from *key
	if after != nil {
		from = &key{after.At, after.ID}
	}
	out := page(s.idle(deadline), func(r ledger.ExtensionRun) key { return key{r.LastMovedAt, r.RunID} }, from, limit)
	for i, r := range out {
		if r.Malformed != "" {
			out[i] = ledger.ExtensionRun{RunID: r.RunID, LastMovedAt: r.LastMovedAt, Malformed: r.Malformed}
		}
	}
	return out, nil
}

// CountRunning is ExtensionRunStore.CountRunning: invisible runs are running too, and never
// idle.
func (s *ExtensionRuns) CountRunning(ctx context.Context, deadline time.Time) (int64, error) {
	if err := s.enter(ctx, "CountRunning", ""); err != nil {
		return 0, fmt.Errorf("%s: %w", countWhat(deadline, "count running extension runs", "count idle extension runs"), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !deadline.IsZero() {
		return int64(len(s.idle(deadline))), nil
	}
	n := int64(len(s.invisible))
	for _, r := range s.runs {
		if r.Status == ledger.ExtensionRunning {
			n++
		}
	}
	return n, nil
}

// Invisible is ExtensionRunStore.Invisible.
func (s *ExtensionRuns) Invisible(ctx context.Context) (ledger.Invisible, error) {
	if err := s.enter(ctx, "Invisible", ""); err != nil {
		return ledger.Invisible{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.invisible {
		ids = append(ids, id)
	}
	return invisible(ids), nil
}

// Abandon is ExtensionRunStore.Abandon, with its preconditions: the run must still be running,
// must not have moved since seen, and must still be idle past deadline; an interlock is deleted
// only when it names the run, and one held by another run is reported and left alone; a pause of
// pauses that holds leaves the run (ledger.LeftPaused).
func (s *ExtensionRuns) Abandon(ctx context.Context, runID string, pauses []string, settlement ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	if err := s.settling(ctx, "Abandon", runID); err != nil {
		return ledger.Abandonment{}, fmt.Errorf("abandon extension run %s: %w", runID, err)
	}
	return s.abandon(runID, pauses, &settlement, decide)
}

// PreviewAbandon is ExtensionRunStore.PreviewAbandon: Abandon's reads and decision, and no
// write.
func (s *ExtensionRuns) PreviewAbandon(ctx context.Context, runID string, pauses []string, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	if err := s.enter(ctx, "PreviewAbandon", runID); err != nil {
		return ledger.Abandonment{}, fmt.Errorf("preview abandoning extension run %s: %w", runID, err)
	}
	return s.abandon(runID, pauses, nil, decide)
}

// abandon is Abandon's critical section; with a nil settlement it decides and writes nothing.
func (s *ExtensionRuns) abandon(runID string, pauses []string, settlement *ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[runID]
	switch {
	case !ok:
		return ledger.Abandonment{Why: ledger.LeftExtensionRunMissing}, nil
	case r.Malformed != "":
		return ledger.Abandonment{}, fmt.Errorf("abandon extension run %s: decode: %s", runID, r.Malformed)
	}
	if settlement != nil {
		if mine, ok := ledger.AbandonedBy(r, settlement.WorkflowRunUUID); ok {
			return mine, nil
		}
	}
	out := ledger.Abandonment{Run: r}
	if out.Pause = s.holding(pauses); out.Pause != nil {
		out.Why = ledger.LeftPaused
		return out, nil
	}
	if out.Why = decide(r); out.Why != "" {
		return out, nil
	}
	lock := ledger.InterlockID(r.TenantID, r.ExtensionID)
	if l, held := s.interlocks[lock]; r.Background && held {
		if l.RunID == runID {
			out.InterlockReleased = true
		} else {
			out.InterlockHolder = l.RunID
		}
	}
	out.Swept = true
	if settlement == nil {
		return out, nil
	}
	if out.InterlockReleased {
		delete(s.interlocks, lock)
	}
	written := ledger.AbandonSettlement(*settlement, r, out)
	r.Status, r.Outcome, r.FinishedAt, r.Settlement = ledger.ExtensionFailed, ledger.OutcomeAbandoned, settlement.At, &written
	s.runs[runID] = r
	return out, nil
}
