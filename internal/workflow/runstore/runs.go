package runstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"strings"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// RunRecord is a sweep_runs document; its JSON form (stalesweep runs) has the same field names.
type RunRecord struct {
	WorkflowRunUUID string `firestore:"workflow_run_uuid" json:"workflow_run_uuid"`
	WorkflowType    string `firestore:"workflow_type" json:"workflow_type"`
	Status          string `firestore:"status" json:"status"`
	Trigger         string `firestore:"trigger" json:"trigger"`
	// Actor is who started the run, from something verified: the caller's verified token on
	// HTTP, the Pub/Sub subscription a push came through, the local user for the command.
	Actor string `firestore:"actor,omitempty" json:"actor,omitempty"`
	// ClaimedActor is who a message said started it (its actor attribute): kept apart from
	// Actor, since any publisher to the topic can write it.
	ClaimedActor string `firestore:"claimed_actor,omitempty" json:"claimed_actor,omitempty"`
	// IncludeDisabled says the operator's command was told to sweep an organization that has
	// opted out (--include-disabled).
	IncludeDisabled bool           `firestore:"include_disabled,omitempty" json:"include_disabled,omitempty"`
	InitialData     map[string]any `firestore:"initial_data" json:"initial_data"`
	Output          map[string]any `firestore:"output,omitempty" json:"output,omitempty"`
	Stats           map[string]any `firestore:"stats,omitempty" json:"stats,omitempty"`
	InitiatedAt     time.Time      `firestore:"initiated_at" json:"initiated_at"`
	UpdatedAt       time.Time      `firestore:"updated_at" json:"updated_at"`
	CompletedAt     time.Time      `firestore:"completed_at,omitempty" json:"completed_at,omitzero"`
	FailedAt        time.Time      `firestore:"failed_at,omitempty" json:"failed_at,omitzero"`
	Failure         *Failure       `firestore:"failure,omitempty" json:"failure,omitempty"`
	// History lists the states the run passed through, with when it entered each.
	History []StateEntry `firestore:"history" json:"history"`
	// ExpireAt is when the record (and its receipts) may be deleted (ExpireField): the notable
	// retention from the start (withExpiry), decided again when it finishes.
	ExpireAt time.Time `firestore:"expire_at,omitempty" json:"expire_at,omitzero"`
	// Scope is the scope the run covers, in workflow.ScopeValues.Key form ("fleet" for a
	// fleet-wide workflow): what the guard and a pause name, and what runs list filters on.
	Scope string `firestore:"scope" json:"scope"`
	// OverridePause says the run was told to go ahead though its workflow is paused on its
	// scope, when it started or while it ran: the operator's command or an HTTP caller asked to
	// (override_pause).
	OverridePause bool `firestore:"override_pause,omitempty" json:"override_pause,omitempty"`
	// AbandonedBy and AbandonReason say which operator ended the run as presumed dead, and why
	// (stalesweep runs abandon).
	AbandonedBy   string `firestore:"abandoned_by,omitempty" json:"abandoned_by,omitempty"`
	AbandonReason string `firestore:"abandon_reason,omitempty" json:"abandon_reason,omitempty"`
}

// Failure says why a run failed, in the seeds' field names.
type Failure struct {
	Reason    string `firestore:"failure_reason" json:"failure_reason"`
	Type      string `firestore:"failure_type" json:"failure_type"`
	Step      string `firestore:"failed_step" json:"failed_step"`
	Layer     string `firestore:"failed_layer" json:"failed_layer"`
	AtState   string `firestore:"failed_at_state" json:"failed_at_state"`
	Action    string `firestore:"failed_action" json:"failed_action"`
	Error     string `firestore:"error" json:"error"`
	ErrorType string `firestore:"error_type" json:"error_type"`
}

// StateEntry is one state a run entered.
type StateEntry struct {
	State string    `firestore:"state" json:"state"`
	At    time.Time `firestore:"at" json:"at"`
}

// ErrRunExists is returned by CreateRun when the workflow_run_uuid is taken.
var ErrRunExists = errors.New("run record exists")

// ErrPaused says the workflow is paused on the run's scope (or fleet-wide): no scheduled, Pub/Sub
// or HTTP run of it starts, and no settling transaction of it writes, until it is resumed or
// the pause ends. Only the stalesweep command and the HTTP face, told to, override it.
var ErrPaused = errors.New("the workflow is paused on this scope")

// PausedError says which pause stopped a run.
type PausedError struct{ Pause pausestore.Pause }

func (e *PausedError) Error() string { return fmt.Sprintf("%v: %s", ErrPaused, e.Pause) }

func (e *PausedError) Unwrap() error { return ErrPaused }

// ErrBadTransition is returned by TransitionRun when the record is not in the expected state.
var ErrBadTransition = errors.New("run record is not in the expected state")

// BadTransitionError says which state the record was in.
type BadTransitionError struct {
	Status string
	From   []string
}

func (e *BadTransitionError) Error() string {
	return fmt.Sprintf("%v: it is %q, want one of %q", ErrBadTransition, e.Status, e.From)
}

func (e *BadTransitionError) Unwrap() error { return ErrBadTransition }

// Store writes workflow run records.
type Store struct {
	client *firestore.Client
}

// New returns a store on client.
func New(client *firestore.Client) *Store { return &Store{client: client} }

func (s *Store) ref(uuid string) *firestore.DocumentRef {
	return s.client.Collection(ledger.RunsCollection).Doc(uuid)
}

// CreateRun writes a new record; it fails with ErrRunExists if one has the same uuid. A record
// without ExpireAt gets the default notable expiry from its start.
func (s *Store) CreateRun(ctx context.Context, r RunRecord) error {
	r = r.withExpiry()
	if _, err := s.ref(r.WorkflowRunUUID).Create(ctx, r); err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return fmt.Errorf("create run %s: %w", r.WorkflowRunUUID, ErrRunExists)
		}
		return fmt.Errorf("create run %s: %w", r.WorkflowRunUUID, err)
	}
	return nil
}

// GuardClaim asks StartRun to take a scope's guard along with creating the record.
type GuardClaim struct {
	Key   string // GuardKey of the workflow type and scope
	Guard Guard  // ExpiresAt is set from TTL
	TTL   time.Duration
	// Pauses are sweep_pauses ids (PauseIDs) read in the same transaction: one that holds at
	// Guard.AcquiredAt refuses the start with a *PausedError, so a pause taken after the
	// caller's own check still stops the run.
	Pauses []string
}

// StartRun creates a new run record and, with a claim, takes the scope's guard in the same
// transaction: one commit for both, and neither without the other. It fails with a
// *GuardHeldError when an unexpired guard is held (checked first), ErrRunExists when the uuid is
// taken, and a *PausedError when a pause the claim names holds. When it takes over an expired
// guard it returns that guard, so the caller can close the run that left it.
func (s *Store) StartRun(ctx context.Context, r RunRecord, claim *GuardClaim) (expired *Guard, err error) {
	if claim == nil {
		return nil, s.CreateRun(ctx, r)
	}
	r = r.withExpiry()
	g := claim.Guard
	g.ExpiresAt = g.AcquiredAt.Add(claim.TTL)
	if g.ExpireAt.IsZero() {
		g.ExpireAt = r.ExpireAt
	}
	// A guard is never deleted as expired before another run could take it over.
	g.ExpireAt = maxTime(g.ExpireAt, g.ExpiresAt)
	guardRef := s.client.Collection(ledger.GuardsCollection).Doc(claim.Key)
	runRef := s.ref(r.WorkflowRunUUID)
	refs := []*firestore.DocumentRef{guardRef}
	for _, id := range claim.Pauses {
		refs = append(refs, s.client.Collection(pausestore.PausesCollection).Doc(id))
	}
	err = s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		if p := pausestore.ActivePause(pausestore.DecodePauses(snaps[1:]), g.AcquiredAt); p != nil {
			return &PausedError{Pause: *p}
		}
		if expired, err = takeOver(snaps[0], g); err != nil {
			return err
		}
		taken := g
		if expired != nil {
			taken.TookOver = expired.WorkflowRunUUID
		}
		if err := tx.Set(guardRef, taken); err != nil {
			return err
		}
		// The record is not read: Create's precondition refuses a taken uuid at commit, and the
		// whole transaction with it.
		return tx.Create(runRef, r)
	}, firestore.MaxAttempts(3))
	if status.Code(err) == codes.AlreadyExists {
		return nil, fmt.Errorf("start run %s: %w", r.WorkflowRunUUID, ErrRunExists)
	}
	if err != nil {
		return nil, fmt.Errorf("start run %s: %w", r.WorkflowRunUUID, err)
	}
	return expired, nil
}

// withExpiry gives a record that has none the default expiry of a run in flight: notable, from
// its start.
func (r RunRecord) withExpiry() RunRecord {
	if r.ExpireAt.IsZero() {
		r.ExpireAt = ledger.ExpiryAt(r.InitiatedAt, ledger.Retention{}.WithDefaults(), true)
	}
	return r
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// GetRun reads a record.
func (s *Store) GetRun(ctx context.Context, uuid string) (RunRecord, error) {
	snap, err := s.ref(uuid).Get(ctx)
	if err != nil {
		return RunRecord{}, fmt.Errorf("get run %s: %w", uuid, err)
	}
	var r RunRecord
	if err := snap.DataTo(&r); err != nil {
		return RunRecord{}, fmt.Errorf("decode run %s: %w", uuid, err)
	}
	return r, nil
}

// RunUpdate is what a transition writes besides the state.
type RunUpdate struct {
	Output      map[string]any
	Stats       map[string]any
	CompletedAt time.Time
	FailedAt    time.Time
	Failure     *Failure
	// ExpireAt, when set, is the record's new expiry (ExpireField), decided as it finishes;
	// NotableExpireAt replaces it when a sync has marked the record RunNotable.
	ExpireAt        time.Time
	NotableExpireAt time.Time
	// ReleaseGuard, when set, names a guard (a GuardKey) the transition deletes in the same
	// transaction if this run still holds it.
	ReleaseGuard string
	// RefuseLiveAt, when set with ReleaseGuard, refuses the transition with a *GuardHeldError,
	// writing nothing, while the guard names this run and its lease holds past RefuseLiveAt: the
	// run is renewing it, so it is alive (stalesweep runs abandon).
	RefuseLiveAt time.Time
	// AbandonedBy and AbandonReason, when set, record the operator who ended the run as
	// presumed dead, and why.
	AbandonedBy, AbandonReason string
}

// TransitionRun moves a record to state `to` at `at`, in a transaction, if its current state
// is one of from; otherwise it fails with ErrBadTransition and writes nothing. With
// u.ReleaseGuard it also releases that guard, in the same transaction, if the run holds it.
func (s *Store) TransitionRun(ctx context.Context, uuid string, from []string, to string, at time.Time, u RunUpdate) error {
	ref := s.ref(uuid)
	refs := []*firestore.DocumentRef{ref}
	if u.ReleaseGuard != "" {
		refs = append(refs, s.client.Collection(ledger.GuardsCollection).Doc(u.ReleaseGuard))
	}
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		snap := snaps[0]
		if !snap.Exists() {
			return status.Errorf(codes.NotFound, "run record %s not found", uuid)
		}
		cur, err := snap.DataAt("status")
		if err != nil {
			return err
		}
		if st, _ := cur.(string); !slices.Contains(from, st) {
			return &BadTransitionError{Status: st, From: from}
		}
		held := len(snaps) > 1 && snaps[1].Exists()
		if held {
			var g Guard
			if err := snaps[1].DataTo(&g); err != nil {
				return err
			}
			if held = g.WorkflowRunUUID == uuid; held && !u.RefuseLiveAt.IsZero() && g.ExpiresAt.After(u.RefuseLiveAt) {
				return &GuardHeldError{Holder: g}
			}
		}
		updates := []firestore.Update{
			{Path: "status", Value: to},
			{Path: "updated_at", Value: at},
			{Path: "history", Value: firestore.ArrayUnion(StateEntry{State: to, At: at})},
		}
		if u.Output != nil {
			updates = append(updates, firestore.Update{Path: "output", Value: u.Output})
		}
		if u.Stats != nil {
			updates = append(updates, firestore.Update{Path: "stats", Value: u.Stats})
		}
		if !u.CompletedAt.IsZero() {
			updates = append(updates, firestore.Update{Path: "completed_at", Value: u.CompletedAt})
		}
		if !u.FailedAt.IsZero() {
			updates = append(updates, firestore.Update{Path: "failed_at", Value: u.FailedAt})
		}
		if u.Failure != nil {
			updates = append(updates, firestore.Update{Path: "failure", Value: u.Failure})
		}
		if u.AbandonedBy != "" {
			updates = append(updates, firestore.Update{Path: "abandoned_by", Value: u.AbandonedBy},
				firestore.Update{Path: "abandon_reason", Value: u.AbandonReason})
		}
		if exp := u.ExpireAt; !exp.IsZero() {
			if v, _ := snap.DataAt(ledger.RunNotable); v == true && !u.NotableExpireAt.IsZero() {
				exp = u.NotableExpireAt
			}
			updates = append(updates, firestore.Update{Path: ledger.ExpireField, Value: exp})
		}
		if err := tx.Update(ref, updates); err != nil {
			return err
		}
		if held {
			return tx.Delete(refs[1])
		}
		return nil
	}, firestore.MaxAttempts(3))
	if err != nil {
		return fmt.Errorf("move run %s to %s: %w", uuid, to, err)
	}
	return nil
}

// StorableJSON converts JSON into values Firestore stores faithfully: objects to maps, integers
// to int64 (not float64), other numbers to float64.
func StorableJSON(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode json for storage: %w", err)
	}
	return storable(v).(map[string]any), nil
}

func storable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = storable(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = storable(e)
		}
		return x
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	default:
		return v
	}
}

// SyncReceipts returns up to limit receipts of a run's syncs (pipeline path), and how many
// there are of each change kind among them.
func (s *Store) SyncReceipts(ctx context.Context, runUUID string, limit int) ([]ledger.SyncReceipt, map[string]int, error) {
	snaps, err := s.ref(runUUID).Collection(ledger.SyncsCollection).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, nil, fmt.Errorf("read sync receipts of run %s: %w", runUUID, err)
	}
	out := make([]ledger.SyncReceipt, 0, len(snaps))
	counts := map[string]int{}
	for _, snap := range snaps {
		var r ledger.SyncReceipt
		if err := snap.DataTo(&r); err != nil {
			return nil, nil, fmt.Errorf("decode sync receipt %s: %w", snap.Ref.Path, err)
		}
		out = append(out, r)
		key := r.Change
		if r.Outcome != "" {
			key += ":" + r.Outcome
		}
		counts[key]++
	}
	return out, counts, nil
}

// Guard is a sweep_guards document: the run that holds a scope, until when.
type Guard struct {
	WorkflowRunUUID string    `firestore:"workflow_run_uuid"`
	WorkflowType    string    `firestore:"workflow_type"`
	Scope           string    `firestore:"scope"`
	AcquiredAt      time.Time `firestore:"acquired_at"`
	ExpiresAt       time.Time `firestore:"expires_at"`
	// ExpireAt is when gc or a TTL policy may delete a guard its run never released
	// (ExpireField); not to be confused with ExpiresAt, when another run may take it over.
	ExpireAt time.Time `firestore:"expire_at,omitempty"`
	// TookOver names the run whose expired guard this one replaced, so that a start whose
	// answer was lost, read back, still closes that run's record.
	TookOver string `firestore:"took_over,omitempty"`
}

// ErrGuardHeld is returned by Store.StartRun when another live run holds the scope.
var ErrGuardHeld = errors.New("a run of this workflow on this scope is in progress")

// GuardHeldError says which run holds the scope.
type GuardHeldError struct{ Holder Guard }

func (e *GuardHeldError) Error() string {
	return fmt.Sprintf("%v: run %s, until %s", ErrGuardHeld, e.Holder.WorkflowRunUUID, e.Holder.ExpiresAt.UTC().Format(time.RFC3339))
}

func (e *GuardHeldError) Unwrap() error { return ErrGuardHeld }

// GuardStore renews and reads per-scope run guards; Store.StartRun takes one with its record,
// and only Store.TransitionRun ending the record deletes it (the package doc).
type GuardStore struct{ client *firestore.Client }

// NewGuardStore returns a store on client.
func NewGuardStore(client *firestore.Client) *GuardStore { return &GuardStore{client: client} }

// GuardKey is the document id of the guard of one workflow type on one scope.
func GuardKey(workflowType, scope string) string {
	return strings.NewReplacer("/", "_").Replace(workflowType + ":" + scope)
}

// takeOver decides whether g may take the guard whose current document is snap (nil or not
// existing when there is none): a *GuardHeldError while it has not expired, else the expired
// guard it replaces, if any.
func takeOver(snap *firestore.DocumentSnapshot, g Guard) (*Guard, error) {
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var cur Guard
	if err := snap.DataTo(&cur); err != nil {
		return nil, err
	}
	if cur.ExpiresAt.After(g.AcquiredAt) {
		return nil, &GuardHeldError{Holder: cur}
	}
	return &cur, nil
}

// ErrGuardLost is returned by GuardStore.Renew when the guard no longer names the run: another
// run took it over after it expired, or an operator ended the run (stalesweep runs abandon).
var ErrGuardLost = errors.New("the run no longer holds its scope's guard")

// GuardLostError says who holds the guard now; Holder is nil when nobody does.
type GuardLostError struct{ Holder *Guard }

func (e *GuardLostError) Error() string {
	if e.Holder == nil {
		return ErrGuardLost.Error() + ": the guard is gone"
	}
	return fmt.Sprintf("%v: run %s holds it", ErrGuardLost, e.Holder.WorkflowRunUUID)
}

func (e *GuardLostError) Unwrap() error { return ErrGuardLost }

// Renew extends the lease of the guard of key to until, in a transaction, if run still holds
// it; otherwise it fails with a *GuardLostError and writes nothing. It renews a lease that has
// expired but that no other run has taken over: nobody else acted on it.
func (s *GuardStore) Renew(ctx context.Context, key, runUUID string, until time.Time) error {
	ref := s.client.Collection(ledger.GuardsCollection).Doc(key)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			return &GuardLostError{}
		}
		if err != nil {
			return err
		}
		var cur Guard
		if err := snap.DataTo(&cur); err != nil {
			return err
		}
		if cur.WorkflowRunUUID != runUUID {
			return &GuardLostError{Holder: &cur}
		}
		return tx.Update(ref, []firestore.Update{{Path: "expires_at", Value: until}, {Path: ledger.ExpireField, Value: maxTime(cur.ExpireAt, until)}})
	}, firestore.MaxAttempts(3))
	if err != nil {
		return fmt.Errorf("renew guard %s: %w", key, err)
	}
	return nil
}

// Get reads the guard of key; nil when there is none.
func (s *GuardStore) Get(ctx context.Context, key string) (*Guard, error) {
	snap, err := s.client.Collection(ledger.GuardsCollection).Doc(key).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get guard %s: %w", key, err)
	}
	var g Guard
	if err := snap.DataTo(&g); err != nil {
		return nil, fmt.Errorf("decode guard %s: %w", key, err)
	}
	return &g, nil
}
