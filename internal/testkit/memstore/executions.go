package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Executions is the runner executions' ledger in memory — the rows, the organizations' opt-out,
// the run records a sync's trust rule reads, the executor targets' judgments and the runs'
// receipts — : executionsync.Store, as *ledger.ExecutionStore is.
type Executions struct {
	Hooks

	mu            sync.Mutex
	rows          map[string]ledger.Execution
	invisible     map[string]ledger.Execution // active, observed_at not a timestamp
	organizations map[string]bool             // sweeps_enabled; absent: no document
	runs          map[string]ledger.RunFacts
	targets       map[string]ledger.Target
	receipts      map[[2]string]ledger.SyncReceipt // (run, row)
}

// NewExecutions returns an empty store.
func NewExecutions() *Executions {
	return &Executions{rows: map[string]ledger.Execution{}, invisible: map[string]ledger.Execution{},
		organizations: map[string]bool{}, runs: map[string]ledger.RunFacts{}, targets: map[string]ledger.Target{},
		receipts: map[[2]string]ledger.SyncReceipt{}}
}

// Put writes a row as it is. With Malformed set it stands for a document that does not decode:
// only its UUID, OrganizationUUID, Provider, Active and ObservedAt are readable.
func (s *Executions) Put(e ledger.Execution) { put(&s.mu, s.rows, e.UUID, e) }

// PutInvisible writes an active row of e's organization and provider whose observed_at is
// missing or not a timestamp.
func (s *Executions) PutInvisible(e ledger.Execution) { put(&s.mu, s.invisible, e.UUID, e) }

// PutOrganization writes an organization's sweeps_enabled.
func (s *Executions) PutOrganization(id string, sweepsEnabled bool) {
	put(&s.mu, s.organizations, id, sweepsEnabled)
}

// PutRun writes the fields of a run record a sync's trust rule reads.
func (s *Executions) PutRun(id string, f ledger.RunFacts) { put(&s.mu, s.runs, id, f) }

// PutTarget writes an executor target's judgment.
func (s *Executions) PutTarget(t ledger.Target) { put(&s.mu, s.targets, t.Target, t) }

// Get reads a row.
func (s *Executions) Get(id string) (ledger.Execution, bool) { return get(&s.mu, s.rows, id) }

// Receipt reads the receipt of run's sync of a row.
func (s *Executions) Receipt(run, id string) (ledger.SyncReceipt, bool) {
	return get(&s.mu, s.receipts, [2]string{run, id})
}

// Scan is ExecutionStore.Scan.
func (s *Executions) Scan(ctx context.Context, q ledger.ScanQuery) ([]ledger.Execution, *ledger.Cursor, error) {
	if q.PageSize <= 0 {
		return nil, nil, fmt.Errorf("scan executions: page size %d must be positive", q.PageSize)
	}
	if err := s.enter(ctx, "Scan", ""); err != nil {
		return nil, nil, fmt.Errorf("scan executions of organization %s: %w", q.OrganizationUUID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var stale []ledger.Execution
	for _, e := range s.rows {
		if e.OrganizationUUID == q.OrganizationUUID && e.Provider == q.Provider && e.Active && !e.ObservedAt.After(q.Horizon) {
			stale = append(stale, e)
		}
	}
	var from *key
	if q.After != nil {
		from = &key{q.After.At, q.After.ID}
	}
	out := page(stale, func(e ledger.Execution) key { return key{e.ObservedAt, e.UUID} }, from, q.PageSize)
	var cur *ledger.Cursor
	for i, e := range out {
		if e.Malformed != "" {
			out[i] = ledger.Execution{UUID: e.UUID, Malformed: e.Malformed}
		} else {
			out[i] = clone(e)
		}
		cur = &ledger.Cursor{At: e.ObservedAt, ID: e.UUID}
	}
	return out, cur, nil
}

// StaleOrganizations is ExecutionStore.StaleOrganizations.
func (s *Executions) StaleOrganizations(ctx context.Context, orgs []string, provider string, horizon time.Time) ([]string, error) {
	if len(orgs) > firestoreconn.InMax {
		return nil, fmt.Errorf("find stale organizations: %d organizations asked at once, at most %d", len(orgs), firestoreconn.InMax)
	}
	if err := s.enter(ctx, "StaleOrganizations", ""); err != nil {
		return nil, fmt.Errorf("find stale organizations among %d: %w", len(orgs), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	asked := map[string]bool{}
	for _, o := range orgs {
		asked[o] = true
	}
	stale := map[string]bool{}
	for _, e := range s.rows {
		if asked[e.OrganizationUUID] && e.Provider == provider && e.Active && !e.ObservedAt.After(horizon) {
			stale[e.OrganizationUUID] = true
		}
	}
	return slices.Sorted(maps.Keys(stale)), nil
}

// Invisible is ExecutionStore.Invisible.
func (s *Executions) Invisible(ctx context.Context, org, provider string) (ledger.Invisible, error) {
	if err := s.enter(ctx, "Invisible", ""); err != nil {
		return ledger.Invisible{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, e := range s.invisible {
		if e.OrganizationUUID == org && e.Provider == provider {
			ids = append(ids, id)
		}
	}
	return invisible(ids), nil
}

// Apply is ExecutionStore.Apply.
func (s *Executions) Apply(ctx context.Context, id string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, error) {
	ch, _, err := s.apply(ctx, "Apply", "", id, reads, decide)
	return ch, err
}

// ApplyOnce is ExecutionStore.ApplyOnce: a receipt for (run, row) is written with every change
// but an error, a refusal and a missing row; a receipt already there makes the call a duplicate
// that writes nothing.
func (s *Executions) ApplyOnce(ctx context.Context, run, id string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, bool, error) {
	return s.apply(ctx, "ApplyOnce", run, id, reads, decide)
}

// apply is one settling transaction as one critical section: the receipt, the row, then what
// reads names, read as the ledger reads them; then the change decide returns, written as the
// ledger writes it.
func (s *Executions) apply(ctx context.Context, op, run, id string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, bool, error) {
	if err := s.settling(ctx, op, id); err != nil {
		return ledger.ExecutionChange{}, false, fmt.Errorf("apply change to execution %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rk := [2]string{run, id}
	if run != "" {
		if _, ok := s.receipts[rk]; ok {
			return ledger.ExecutionChange{}, true, nil
		}
	}
	row, ok := s.rows[id]
	switch {
	case !ok:
		return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: "row_missing"}, false, nil
	case row.Malformed != "":
		return ledger.ExecutionChange{}, false, fmt.Errorf("apply change to execution %s: decode: %s", id, row.Malformed)
	}
	var facts ledger.Facts
	if reads.Organization != "" {
		facts.OrganizationEnabled = s.organizations[reads.Organization]
	}
	if f, ok := s.runs[reads.Run]; ok && reads.Run != "" {
		facts.Run = &f
	}
	if t, ok := s.targets[reads.Target]; ok && reads.Target != "" {
		facts.Target = &t
	}
	ch := decide(clone(row), facts)
	if ch.Kind == ledger.ChangeRefused {
		return ch, false, nil
	}
	s.rows[id] = written(row, ch)
	if run != "" && ch.Kind != ledger.ChangeError {
		s.receipts[rk] = ledger.SyncReceipt{RunnerExecutionUUID: id, Change: string(ch.Kind), Why: ch.Why,
			Outcome: ch.Outcome, Verdict: ch.Verdict, At: ch.At}
	}
	return ch, false, nil
}

// written is row after the ledger's writes of ch.
func written(row ledger.Execution, ch ledger.ExecutionChange) ledger.Execution {
	if ch.Quiet {
		return row
	}
	answered := func() {
		row.Sync.LastSyncedAt, row.Sync.LastVerdict = ch.At, ch.Verdict
		if ch.Target != "" {
			row.Sync.Target = ch.Target
		}
	}
	switch ch.Kind {
	case ledger.ChangeSettle:
		row.Status, row.Active, row.Outcome, row.CompletedAt, row.Settlement = ch.Status, false, ch.Outcome, ch.CompletedAt, ch.Settlement
		if ch.FailureReason != "" {
			row.FailureReason = ch.FailureReason
		}
		answered()
		row.Sync.UnknownSince, row.Sync.PendingOutcome = time.Time{}, ""
	case ledger.ChangeRefresh:
		row.ObservedAt = ch.At
		answered()
		row.Sync.UnknownSince, row.Sync.PendingOutcome = time.Time{}, ch.PendingOutcome
		if ch.Snapshot != nil {
			row.Sync.LastSnapshot = ch.Snapshot
		}
	case ledger.ChangeUnknown:
		answered()
		row.Sync.UnknownSince = ch.UnknownSince
	case ledger.ChangeError:
		row.Sync.LastError, row.Sync.LastErrorAt = ch.Error, ch.At
	default:
		return row
	}
	row.Sync.Attempts++
	return row
}

// clone copies a row's maps, so that a caller's row is not the store's.
func clone(e ledger.Execution) ledger.Execution {
	e.ProviderRef = maps.Clone(e.ProviderRef)
	e.Sync.LastSnapshot = maps.Clone(e.Sync.LastSnapshot)
	return e
}

// Peek is ExecutionStore.Peek: the row and what reads names, read as apply reads them, writing
// nothing. A memory store keeps no raw document: Raw is nil.
func (s *Executions) Peek(ctx context.Context, id string, reads ledger.Reads) (ledger.Peeked, error) {
	if err := ctx.Err(); err != nil {
		return ledger.Peeked{}, fmt.Errorf("peek execution %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[id]
	if !ok {
		return ledger.Peeked{}, nil
	}
	p := ledger.Peeked{Found: true, Row: clone(row)}
	if reads.Organization != "" {
		p.Facts.OrganizationEnabled = s.organizations[reads.Organization]
	}
	if f, ok := s.runs[reads.Run]; ok && reads.Run != "" {
		p.Facts.Run = &f
	}
	if t, ok := s.targets[reads.Target]; ok && reads.Target != "" {
		p.Facts.Target = &t
	}
	return p, nil
}
