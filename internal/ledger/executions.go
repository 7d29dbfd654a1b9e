package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// ExecutionsCollection holds one document per runner execution, keyed by its uuid.
const ExecutionsCollection = "runner_executions"

// Providers a row's provider field may name.
const (
	ProviderCloudRun   = "cloud_run"
	ProviderKubernetes = "kubernetes"
)

// Row statuses; pending and running are active.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Settlement outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
	OutcomeLost      = "lost"
	OutcomeAbandoned = "abandoned"
)

// Execution is a runner_executions document. Runners write everything but Sync and Settlement.
type Execution struct {
	UUID             string         `firestore:"-"`
	OrganizationUUID string         `firestore:"organization_uuid"`
	RunnerGroupUUID  string         `firestore:"runner_group_uuid,omitempty"`
	Provider         string         `firestore:"provider"`
	ProviderRef      map[string]any `firestore:"provider_ref,omitempty"`
	Status           string         `firestore:"status"`
	Active           bool           `firestore:"active"`
	ObservedAt       time.Time      `firestore:"observed_at"`
	Outcome          string         `firestore:"outcome,omitempty"`
	CompletedAt      time.Time      `firestore:"completed_at,omitempty"`
	FailureReason    string         `firestore:"failure_reason,omitempty"`
	Sync             SyncState      `firestore:"sync,omitempty"`
	Settlement       *Settlement    `firestore:"settlement,omitempty"`

	// Malformed is set, instead of the fields above, when a scanned document could not be decoded.
	Malformed string `firestore:"-"`
}

// SyncState is stalesweep's own bookkeeping on a row.
type SyncState struct {
	LastSyncedAt   time.Time `firestore:"last_synced_at,omitempty"`
	LastVerdict    string    `firestore:"last_verdict,omitempty"`
	Attempts       int64     `firestore:"attempts,omitempty"`
	UnknownSince   time.Time `firestore:"unknown_since,omitempty"`
	PendingOutcome string    `firestore:"pending_outcome,omitempty"`
	LastError      string    `firestore:"last_error,omitempty"`
	LastErrorAt    time.Time `firestore:"last_error_at,omitempty"`
	// LastSnapshot is the last thing the executor said about a live execution, kept through an
	// unknown spell so that a lost settlement can carry it.
	LastSnapshot map[string]any `firestore:"last_snapshot,omitempty"`
	// Target is the executor target that last answered: what the blind-executor guard counts by.
	Target string `firestore:"target,omitempty"`
}

// Settlement is written once, when stalesweep settles a row.
type Settlement struct {
	At              time.Time      `firestore:"at"`
	WorkflowRunUUID string         `firestore:"workflow_run_uuid"`
	Reason          string         `firestore:"reason"`
	Evidence        map[string]any `firestore:"evidence"`
}

// ExecutionStore reads and settles runner_executions.
type ExecutionStore struct {
	client *firestore.Client
	cfg    TxConfig
	keep   Retention        // when receipts expire
	now    func() time.Time // the clock of a receipt whose change carries none
}

// Defaults of TxConfig.
const (
	txTimeoutDefault     = 10 * time.Second
	txMaxAttemptsDefault = 3
)

// TxConfig bounds each settlement transaction. Zero values take the defaults.
type TxConfig struct {
	Timeout     time.Duration // the whole transaction, all attempts
	MaxAttempts int           // Firestore retries only Aborted (contention)
}

// WithDefaults fills zero values with the defaults.
func (c TxConfig) WithDefaults() TxConfig {
	c.Timeout = cmp.Or(c.Timeout, txTimeoutDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, txMaxAttemptsDefault)
	return c
}

// NewExecutionStore returns a store on client whose receipts expire after keep.
func NewExecutionStore(client *firestore.Client, cfg TxConfig, keep Retention) *ExecutionStore {
	return &ExecutionStore{client: client, cfg: cfg.WithDefaults(), keep: keep.WithDefaults(), now: time.Now}
}

func (s *ExecutionStore) ref(uuid string) *firestore.DocumentRef {
	return s.client.Collection(ExecutionsCollection).Doc(uuid)
}

// Get reads one row.
func (s *ExecutionStore) Get(ctx context.Context, uuid string) (Execution, error) {
	snap, err := s.ref(uuid).Get(ctx)
	if err != nil {
		return Execution{}, fmt.Errorf("get execution %s: %w", uuid, err)
	}
	return decodeExecution(snap)
}

// ScanQuery selects stale active rows.
type ScanQuery struct {
	OrganizationUUID string
	Provider         string
	Horizon          time.Time // rows observed at or before it are stale
	PageSize         int
	After            *Cursor // resume after this row; nil starts from the oldest
}

// Cursor is where a scan stopped: the last row's value of the field the scan orders on and its
// document id.
type Cursor struct {
	At time.Time
	ID string
}

// Scan returns one page of stale active rows of one organization and provider, oldest observed
// first, and the cursor after the last row. Rows that cannot be decoded come back with
// Malformed set, so one bad writer cannot stop the scan.
func (s *ExecutionStore) Scan(ctx context.Context, q ScanQuery) ([]Execution, *Cursor, error) {
	if q.PageSize <= 0 {
		return nil, nil, fmt.Errorf("scan executions: page size %d must be positive", q.PageSize)
	}
	query := s.client.Collection(ExecutionsCollection).
		Where("organization_uuid", "==", q.OrganizationUUID).
		Where("provider", "==", q.Provider).
		Where("active", "==", true).
		Where("observed_at", "<=", q.Horizon).
		OrderBy("observed_at", firestore.Asc).
		OrderBy(firestore.DocumentID, firestore.Asc).
		Limit(q.PageSize)
	if q.After != nil {
		query = query.StartAfter(q.After.At, s.ref(q.After.ID))
	}
	snaps, err := query.Documents(ctx).GetAll()
	if err != nil {
		return nil, nil, fmt.Errorf("scan executions of organization %s: %w", q.OrganizationUUID, err)
	}
	rows := make([]Execution, 0, len(snaps))
	var cur *Cursor
	for _, snap := range snaps {
		row, err := decodeExecution(snap)
		if err != nil {
			row = Execution{UUID: snap.Ref.ID, Malformed: err.Error()}
		}
		rows = append(rows, row)
		// The cursor needs the stored observed_at even when the rest would not decode.
		if v, err := snap.DataAt("observed_at"); err == nil {
			if t, ok := v.(time.Time); ok {
				cur = &Cursor{At: t, ID: snap.Ref.ID}
			}
		}
	}
	return rows, cur, nil
}

// StaleOrganizations returns which of orgs (at most firestoreconn.InMax) have a stale active row
// of provider, by an `in` query of one document served by the scan's index, re-asked without
// each organization it finds: a batch of quiet organizations costs one read, and one
// organization with ten thousand stale rows cannot hide another.
func (s *ExecutionStore) StaleOrganizations(ctx context.Context, orgs []string, provider string, horizon time.Time) ([]string, error) {
	if len(orgs) > firestoreconn.InMax {
		return nil, fmt.Errorf("find stale organizations: %d organizations asked at once, at most %d", len(orgs), firestoreconn.InMax)
	}
	pending := slices.Compact(slices.Sorted(slices.Values(orgs)))
	var found []string
	for len(pending) > 0 {
		snaps, err := s.client.Collection(ExecutionsCollection).
			Where("organization_uuid", "in", pending).
			Where("provider", "==", provider).
			Where("active", "==", true).
			Where("observed_at", "<=", horizon).
			OrderBy("observed_at", firestore.Asc).
			Limit(1).Documents(ctx).GetAll()
		if err != nil {
			return nil, fmt.Errorf("find stale organizations among %d: %w", len(pending), err)
		}
		if len(snaps) == 0 {
			break
		}
		v, _ := snaps[0].DataAt("organization_uuid")
		org, _ := v.(string)
		i, ok := slices.BinarySearch(pending, org)
		if !ok {
			return nil, fmt.Errorf("find stale organizations: row %s belongs to none of the organizations asked", snaps[0].Ref.ID)
		}
		found = append(found, org)
		pending = slices.Delete(pending, i, i+1)
	}
	return found, nil
}

func decodeExecution(snap *firestore.DocumentSnapshot) (Execution, error) {
	var e Execution
	if err := snap.DataTo(&e); err != nil {
		return Execution{}, fmt.Errorf("decode execution %s: %w", snap.Ref.ID, err)
	}
	e.UUID = snap.Ref.ID
	return e, nil
}

// ChangeKind says what a settlement transaction writes.
type ChangeKind string

// The changes. None and Refused write nothing.
const (
	ChangeNone    ChangeKind = "none"    // the row is not in the state the decision was made on
	ChangeSettle  ChangeKind = "settle"  // the execution is over: status, outcome, settlement
	ChangeRefresh ChangeKind = "refresh" // still running: observed_at and sync
	ChangeUnknown ChangeKind = "unknown" // the executor does not know it: sync.unknown_since
	ChangeError   ChangeKind = "error"   // the executor call failed: sync.last_error
	// ChangeRefused: a rule about who may write the row is broken. Nothing is written, not even a
	// receipt.
	ChangeRefused ChangeKind = "refused"
)

// ExecutionChange is a decision about one row, in terms of what to write.
type ExecutionChange struct {
	Kind ChangeKind
	// Why says, for None and Refused, why nothing is written.
	Why string
	At  time.Time // the decision's now: last_synced_at, observed_at on refresh, settlement.at

	Verdict string // sync.last_verdict

	Status        string
	Outcome       string
	CompletedAt   time.Time
	FailureReason string
	Settlement    *Settlement

	// Unknown: when the executor first stopped knowing the execution.
	UnknownSince time.Time
	// Quiet: an Unknown change that says nothing the row does not already hold: nothing is written.
	Quiet bool
	// Refresh: an outcome the executor already knows while the execution finishes.
	PendingOutcome string
	Snapshot       map[string]any
	Error          string
	// Target is the executor target that answered (sync.target), written with every answer.
	Target string
}

// Reads names the documents a settling transaction reads besides the row, so that the rules
// about who may write the row are checked on what the transaction itself read.
type Reads struct {
	Organization string // organizations/{id}: whether it has opted out of sweeps
	Run          string // sweep_runs/{id}: the run a message says the sync belongs to
	Target       string // sweep_targets/{target}: whether the row's executor target is blind
	// Pauses are sweep_pauses ids (PauseIDs): whether the workflow is paused on the row's scope.
	Pauses []string
}

// Facts is what a settling transaction read besides the row.
type Facts struct {
	// OrganizationEnabled: organizations/{Reads.Organization} exists with sweeps_enabled true.
	OrganizationEnabled bool
	Run                 *RunFacts
	Target              *Target
	// Pauses are the pauses of Reads.Pauses that exist, ended ones included (ActivePause).
	Pauses []pausestore.Pause
}

// RunFacts are the fields of a run record that say which syncs belong to it.
type RunFacts struct {
	WorkflowType string
	Status       string
	Organization string   // initial_data.organization_uuid: the run's scope
	Started      []string // output.started_runner_execution_uuids, once the run has finished
}

// Apply settles or syncs one row in one transaction. decide may run once per attempt and must
// be pure; a row that no longer exists is ChangeNone "row_missing".
func (s *ExecutionStore) Apply(ctx context.Context, uuid string, reads Reads, decide func(Execution, Facts) ExecutionChange) (ExecutionChange, error) {
	ch, _, err := s.apply(ctx, uuid, reads, nil, decide)
	return ch, err
}

// ApplyOnce is Apply for one run's sync of one row delivered at least once: in the same
// transaction it writes a receipt, and when the receipt is already there it writes nothing and
// reports a duplicate. ChangeError leaves no receipt, so a redelivery after a failed executor
// call tries again.
func (s *ExecutionStore) ApplyOnce(ctx context.Context, runUUID, uuid string, reads Reads, decide func(Execution, Facts) ExecutionChange) (ExecutionChange, bool, error) {
	receipt := s.client.Collection(RunsCollection).Doc(runUUID).Collection(SyncsCollection).Doc(uuid)
	return s.apply(ctx, uuid, reads, receipt, decide)
}

func (s *ExecutionStore) apply(ctx context.Context, uuid string, reads Reads, receipt *firestore.DocumentRef, decide func(Execution, Facts) ExecutionChange) (ExecutionChange, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ref := s.ref(uuid)
	rd := s.readsOf(uuid, reads)
	receiptAt := -1
	if receipt != nil {
		receiptAt = len(rd.refs)
		rd.refs = append(rd.refs, receipt)
	}
	var applied ExecutionChange
	var duplicate bool
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		applied, duplicate = ExecutionChange{}, false
		snaps, err := tx.GetAll(rd.refs)
		if err != nil {
			return err
		}
		if receiptAt >= 0 && snaps[receiptAt].Exists() {
			duplicate = true
			return nil
		}
		if !snaps[0].Exists() {
			applied = ExecutionChange{Kind: ChangeNone, Why: "row_missing"}
			return nil
		}
		row, err := decodeExecution(snaps[0])
		if err != nil {
			return err
		}
		applied = decide(row, rd.facts(snaps))
		if applied.Kind == ChangeRefused {
			return nil
		}
		if updates := applied.updates(row); len(updates) > 0 {
			if err := tx.Update(ref, updates); err != nil {
				return err
			}
		}
		if receipt != nil && applied.Kind != ChangeError {
			var runExpiry time.Time
			if rd.runAt >= 0 && snaps[rd.runAt].Exists() {
				if v, err := snaps[rd.runAt].DataAt(ExpireField); err == nil {
					runExpiry, _ = v.(time.Time)
				}
			}
			at := cmp.Or(applied.At, s.now())
			if applied.Kind == ChangeSettle && applied.Outcome == OutcomeLost && rd.runAt >= 0 && snaps[rd.runAt].Exists() {
				// The run settled a row lost after it may have finished: its record is kept for the notable
				// retention, once (RunNotable).
				if v, _ := snaps[rd.runAt].DataAt(RunNotable); v != true {
					runExpiry = ExpiryAt(at, s.keep, true)
					if err := tx.Update(rd.refs[rd.runAt], []firestore.Update{{Path: RunNotable, Value: true}, {Path: ExpireField, Value: runExpiry}}); err != nil {
						return err
					}
				}
			}
			r := applied.receipt(uuid)
			r.ExpireAt = receiptExpiry(at, s.keep, runExpiry)
			return tx.Create(receipt, r)
		}
		return nil
	}, firestore.MaxAttempts(s.cfg.MaxAttempts))
	if err != nil {
		return ExecutionChange{}, false, fmt.Errorf("apply change to execution %s: %w", uuid, err)
	}
	return applied, duplicate, nil
}

type rowReads struct {
	refs                   []*firestore.DocumentRef
	orgAt, runAt, targetAt int
	pausesAt, pauses       int // the pause documents: refs[pausesAt:pausesAt+pauses]
}

func (s *ExecutionStore) readsOf(uuid string, reads Reads) rowReads {
	rd := rowReads{refs: []*firestore.DocumentRef{s.ref(uuid)}, orgAt: -1, runAt: -1, targetAt: -1}
	add := func(r *firestore.DocumentRef) int { rd.refs = append(rd.refs, r); return len(rd.refs) - 1 }
	if reads.Organization != "" {
		rd.orgAt = add(s.client.Collection(OrganizationsCollection).Doc(reads.Organization))
	}
	if reads.Run != "" {
		rd.runAt = add(s.client.Collection(RunsCollection).Doc(reads.Run))
	}
	if reads.Target != "" {
		rd.targetAt = add(s.client.Collection(TargetsCollection).Doc(TargetID(reads.Target)))
	}
	rd.pausesAt, rd.pauses = len(rd.refs), len(reads.Pauses)
	for _, id := range reads.Pauses {
		add(s.client.Collection(pausestore.PausesCollection).Doc(id))
	}
	return rd
}

func (rd rowReads) facts(snaps []*firestore.DocumentSnapshot) Facts {
	var facts Facts
	if rd.orgAt >= 0 {
		facts.OrganizationEnabled = SweepsEnabled(snaps[rd.orgAt])
	}
	if rd.runAt >= 0 && snaps[rd.runAt].Exists() {
		facts.Run = runFacts(snaps[rd.runAt])
	}
	if rd.targetAt >= 0 && snaps[rd.targetAt].Exists() {
		var t Target
		if err := snaps[rd.targetAt].DataTo(&t); err == nil {
			facts.Target = &t
		}
	}
	facts.Pauses = pausestore.DecodePauses(snaps[rd.pausesAt : rd.pausesAt+rd.pauses])
	return facts
}

// runFacts reads a run record's trust fields; a field of the wrong type reads as empty, which
// no rule accepts.
func runFacts(snap *firestore.DocumentSnapshot) *RunFacts {
	str := func(path string) string {
		v, err := snap.DataAt(path)
		if err != nil {
			return ""
		}
		s, _ := v.(string)
		return s
	}
	f := &RunFacts{WorkflowType: str("workflow_type"), Status: str("status"), Organization: str("initial_data.organization_uuid")}
	if v, err := snap.DataAt("output.started_runner_execution_uuids"); err == nil {
		if list, ok := v.([]any); ok {
			for _, e := range list {
				if s, ok := e.(string); ok {
					f.Started = append(f.Started, s)
				}
			}
		}
	}
	return f
}

func (c ExecutionChange) withTarget(u []firestore.Update) []firestore.Update {
	if c.Target == "" {
		return u
	}
	return append(u, firestore.Update{Path: "sync.target", Value: c.Target})
}

// SyncsCollection is the subcollection of a run record that holds one receipt per row its syncs decided.
const SyncsCollection = "syncs"

// SyncReceipt records what one run's sync decided for one row.
type SyncReceipt struct {
	RunnerExecutionUUID string    `firestore:"runner_execution_uuid"`
	Change              string    `firestore:"change"`
	Why                 string    `firestore:"why,omitempty"`
	Outcome             string    `firestore:"outcome,omitempty"`
	Verdict             string    `firestore:"verdict,omitempty"`
	At                  time.Time `firestore:"at,omitempty"`                // the decision's clock
	RecordedAt          time.Time `firestore:"recorded_at,serverTimestamp"` // Firestore's clock
	ExpireAt            time.Time `firestore:"expire_at"`                   // receiptExpiry
}

// receiptExpiry is when a receipt written at `at` expires: the ordinary retention from then, but
// never after its run's record, since Firestore's TTL deletes a document without its
// subcollections and a receipt outliving its run stops nothing.
func receiptExpiry(at time.Time, r Retention, runExpiry time.Time) time.Time {
	exp := ExpiryAt(at, r, false)
	if !runExpiry.IsZero() && runExpiry.Before(exp) {
		return runExpiry.UTC()
	}
	return exp
}

func (c ExecutionChange) receipt(uuid string) SyncReceipt {
	return SyncReceipt{RunnerExecutionUUID: uuid, Change: string(c.Kind), Why: c.Why, Outcome: c.Outcome, Verdict: c.Verdict, At: c.At}
}

func (c ExecutionChange) updates(row Execution) []firestore.Update {
	if c.Quiet {
		return nil
	}
	attempts := firestore.Update{Path: "sync.attempts", Value: row.Sync.Attempts + 1}
	switch c.Kind {
	case ChangeSettle:
		u := []firestore.Update{
			{Path: "status", Value: c.Status},
			{Path: "active", Value: false},
			{Path: "outcome", Value: c.Outcome},
			{Path: "completed_at", Value: c.CompletedAt},
			{Path: "settlement", Value: c.Settlement},
			{Path: "sync.last_synced_at", Value: c.At},
			{Path: "sync.last_verdict", Value: c.Verdict},
			{Path: "sync.unknown_since", Value: firestore.Delete},
			{Path: "sync.pending_outcome", Value: firestore.Delete},
			attempts,
		}
		u = c.withTarget(u)
		if c.FailureReason != "" {
			u = append(u, firestore.Update{Path: "failure_reason", Value: c.FailureReason})
		}
		return u
	case ChangeRefresh:
		u := []firestore.Update{
			{Path: "observed_at", Value: c.At},
			{Path: "sync.last_synced_at", Value: c.At},
			{Path: "sync.last_verdict", Value: c.Verdict},
			{Path: "sync.unknown_since", Value: firestore.Delete},
			attempts,
		}
		if c.PendingOutcome != "" {
			u = append(u, firestore.Update{Path: "sync.pending_outcome", Value: c.PendingOutcome})
		} else {
			u = append(u, firestore.Update{Path: "sync.pending_outcome", Value: firestore.Delete})
		}
		if c.Snapshot != nil {
			u = append(u, firestore.Update{Path: "sync.last_snapshot", Value: c.Snapshot})
		}
		return c.withTarget(u)
	case ChangeUnknown:
		return c.withTarget([]firestore.Update{
			{Path: "sync.last_synced_at", Value: c.At},
			{Path: "sync.last_verdict", Value: c.Verdict},
			{Path: "sync.unknown_since", Value: c.UnknownSince},
			attempts,
		})
	case ChangeError:
		return []firestore.Update{
			{Path: "sync.last_error", Value: c.Error},
			{Path: "sync.last_error_at", Value: c.At},
			attempts,
		}
	default:
		return nil
	}
}

func pauseRefs(client *firestore.Client, ids []string) []*firestore.DocumentRef {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = client.Collection(pausestore.PausesCollection).Doc(id)
	}
	return refs
}
