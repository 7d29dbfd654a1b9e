package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Trigger says how a run was started.
type Trigger string

// The triggers.
const (
	TriggerSchedule Trigger = "schedule"
	TriggerManual   Trigger = "manual"
	TriggerLocal    Trigger = "local"
)

// Final run states, shared by every state machine.
const (
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// StateReconciling is the state a Linear run does its work in (an execution sync publishes in it).
const StateReconciling = "reconciling"

// State is one state of a workflow's machine and the action that leaves it.
type State struct {
	Name   string
	Action string // the auto-advance action out of this state; empty for the final one
}

// Linear is the state machine of seeds 002 and 003.
var Linear = []State{{"initiated", "reconcile"}, {StateReconciling, "complete"}, {StateCompleted, ""}}

// Atomic is the state machine of seed 004.
var Atomic = []State{{"pending", "execute"}, {StateCompleted, ""}}

// Run is what a workflow body gets.
type Run struct {
	UUID    string
	Type    contract.WorkflowType
	Input   json.RawMessage // validated, defaults applied
	Trigger Trigger
	Actor   string
	Logger  *slog.Logger // carries the run's ids
	// Overrides: Request.Overrides; the per-row transactions skip the checks they override.
	Overrides Overrides
	// DryRun: Request.DryRun; the body runs as usual and writes nothing.
	DryRun bool
}

// Overrides are the guards an operator may ask one run to pass. Each is allowed only from some
// triggers, checked once when the run starts (Check).
type Overrides struct {
	// Storm lets the run past the storm guard. The command only.
	Storm bool
	// OptOut lets the run sweep an organization that opted out. The command only.
	OptOut bool
	// Pause runs the workflow though it is paused on the scope. The command and the HTTP face
	// (override_pause) only.
	Pause bool
}

// Check refuses an override the trigger may not ask for (contract.CodeForbidden).
func (o Overrides) Check(t Trigger) error {
	switch {
	case o.Storm && t != TriggerLocal:
		return contract.Errorf(contract.CodeForbidden, "only the stalesweep command may override the storm guard, not a %s run", t)
	case o.OptOut && t != TriggerLocal:
		return contract.Errorf(contract.CodeForbidden, "only the stalesweep command may sweep an organization that opted out, not a %s run", t)
	case o.Pause && t != TriggerLocal && t != TriggerManual:
		return contract.Errorf(contract.CodeForbidden, "only the stalesweep command and the HTTP face may override a pause, not a %s run", t)
	}
	return nil
}

// Result is what a body returns.
type Result struct {
	// Output is the body's own output fields (JSON-marshalable to an object).
	Output any
	// Stats are counts the seed's output does not list, for the run record and the summary log.
	Stats any
}

// Body runs one workflow run.
type Body func(ctx context.Context, run Run) (Result, error)

// Definition is one workflow type as the engine runs it.
type Definition struct {
	Declaration
	States []State
	// Envelope lists the record fields the seed's output echoes; no other record field reaches it.
	Envelope []string
	// Check, when set, adds rules beyond the schema that depend on the trigger or on what
	// exists; a *contract.ValidationError from it refuses the run before anything is written.
	Check func(ctx context.Context, input json.RawMessage, trigger Trigger) error
	// Scheduled, when set, is a pure rule (a floor) every path but the command applies, so
	// Dispatch can refuse a tick before publishing. Check applies it too.
	Scheduled func(input json.RawMessage) error
	// Probe, when set, says which scopes (at most ProbeBatch) have work at now, Firestore's
	// clock, so Dispatch publishes nothing for a quiet one. It never writes, and must say yes
	// whenever the run could settle something.
	Probe func(ctx context.Context, inputs []json.RawMessage, now time.Time) ([]bool, error)
	// ProbeBatch is how many scopes one Probe call takes; 0 is one.
	ProbeBatch int
	Body       Body
}

// Request asks for one run.
type Request struct {
	Type        contract.WorkflowType
	InitialData json.RawMessage
	Trigger     Trigger
	// Actor is who started the run, from something verified (token, subscription, local user).
	Actor string
	// ClaimedActor is who the request says started it, unverified; recorded apart from Actor.
	ClaimedActor string
	// RunUUID names the run; empty means a new random one.
	RunUUID string
	// Overrides are the guards the run is asked to pass; one its trigger may not ask for is
	// forbidden.
	Overrides Overrides
	// DryRun previews the run: the body writes nothing, and no record or guard is taken.
	DryRun bool
}

// Outcome is a finished run.
type Outcome struct {
	RunUUID string
	Status  string         // completed or failed
	Output  map[string]any // the output the seed lists
	Stats   map[string]any
	Err     error // why it failed; nil when completed
	DryRun  bool  // a preview: nothing was written, and no record of it exists
	// Paused is the pause covering the scope at start, which a dry run reports.
	Paused *pausestore.Pause
}

// Engine starts workflow runs.
type Engine struct {
	runs       *runstore.Store
	guards     *runstore.GuardStore
	guardTTL   time.Duration
	guardLease time.Duration
	defs       map[contract.WorkflowType]Definition
	orgs       Organizations
	keep       ledger.Retention
	pauses     Pauses
	recordTO   time.Duration
	now        func() time.Time
	log        *slog.Logger
}

// Organizations says whether an organization has sweeps enabled (*orgadmin.Store).
type Organizations interface {
	Enabled(ctx context.Context, org string) (bool, error)
}

// Pauses returns the pause covering a run on a scope at now (*pausestore.Store).
type Pauses interface {
	Covering(ctx context.Context, workflowType, scope string, now time.Time) (*pausestore.Pause, error)
}

// RecordTimeout bounds each write and read-back of a run record.
const RecordTimeout = 15 * time.Second

// Options configures an engine.
type Options struct {
	Runs *runstore.Store
	// Guards, when set, keeps two runs of one workflow on one scope from overlapping (see the
	// package doc). GuardTTL must outlast the run's budget; GuardLease is GuardLeaseDefault when zero.
	Guards     *runstore.GuardStore
	GuardTTL   time.Duration
	GuardLease time.Duration
	// Orgs, when set, refuses a run of an organization that opted out of sweeps.
	Orgs Organizations
	// Retention decides when run records and guards expire; zero durations take the defaults.
	Retention ledger.Retention
	// Pauses, when set, refuses a run whose workflow is paused on its scope, unless overridden.
	Pauses Pauses
	// RecordTimeout overrides RecordTimeout when set.
	RecordTimeout time.Duration
	Now           func() time.Time
	Log           *slog.Logger
}

// GuardLeaseDefault is how long a scope stays locked after the process running it died.
const GuardLeaseDefault = 30 * time.Second

// ErrDuplicateRun means the run uuid has already started (a redelivered message).
var ErrDuplicateRun = errors.New("this run has already started")

// ErrOrganizationDisabled says an organization has opted out of sweeps: its organizations
// document is missing or its sweeps_enabled is not true. No scheduled, Pub/Sub or HTTP path
// touches its rows; only the operator's own command, told to (--include-disabled), does.
var ErrOrganizationDisabled = errors.New("the organization has sweeps disabled")

// NewEngine returns an engine running defs.
func NewEngine(o Options, defs ...Definition) *Engine {
	e := &Engine{runs: o.Runs, guards: o.Guards, guardTTL: o.GuardTTL, guardLease: cmp.Or(o.GuardLease, GuardLeaseDefault), defs: make(map[contract.WorkflowType]Definition), orgs: o.Orgs, keep: o.Retention.WithDefaults(), pauses: o.Pauses, recordTO: cmp.Or(o.RecordTimeout, RecordTimeout), now: o.Now, log: o.Log}
	if e.guardTTL == 0 {
		e.guardTTL = 10 * time.Minute
	}
	e.guardLease = min(e.guardLease, e.guardTTL)
	for _, d := range defs {
		e.defs[d.Type] = d
	}
	return e
}

// Definition returns the definition of t, if this engine runs it.
func (e *Engine) Definition(t contract.WorkflowType) (Definition, bool) {
	d, ok := e.defs[t]
	return d, ok
}

// Validate checks a request without running it.
func (e *Engine) Validate(ctx context.Context, req Request) (Definition, json.RawMessage, error) {
	def, ok := e.defs[req.Type]
	switch {
	case !ok && req.Type.Known():
		return Definition{}, nil, contract.Invalid("workflow_type", "enum", "workflow type %q is not available in this build", req.Type)
	case !ok:
		return Definition{}, nil, contract.Invalid("workflow_type", "enum", "unknown workflow type %q", req.Type)
	}
	input, err := contract.Validate(req.Type, req.InitialData)
	if err != nil {
		return Definition{}, nil, err
	}
	if def.Check != nil {
		if err := def.Check(ctx, input, req.Trigger); err != nil {
			return Definition{}, nil, err
		}
	}
	return def, input, nil
}

// Start runs one workflow run to its end. It writes nothing and returns an error when the
// request is invalid (*contract.ValidationError), the scope is held (CodeConflict wrapping
// runstore.ErrGuardHeld), the run uuid has already started (CodeConflict wrapping
// ErrDuplicateRun), the scope is paused and not overridden (CodeConflict; match
// runstore.ErrPaused), or the record cannot be created. A run that starts and fails returns
// an Outcome with Status failed and Err set.
func (e *Engine) Start(ctx context.Context, req Request) (Outcome, error) {
	def, input, err := e.Validate(ctx, req)
	if err != nil {
		return Outcome{}, err
	}
	if req.RunUUID != "" {
		if err := firestoreconn.CheckDocID(req.RunUUID); err != nil {
			return Outcome{}, contract.Invalid("workflow_run_uuid", "format", "must be a document id: it %v", err)
		}
	}
	if err := req.Overrides.Check(req.Trigger); err != nil {
		return Outcome{}, err
	}
	if err := e.checkOptOut(ctx, def.Scope, input, req.Overrides.OptOut); err != nil {
		return Outcome{}, err
	}
	scope := def.Scope.Key(input)
	paused, err := e.checkPause(ctx, def.Type, scope, req)
	if err != nil {
		return Outcome{}, err
	}
	stored, err := runstore.StorableJSON(input)
	if err != nil {
		return Outcome{}, err
	}
	runUUID := req.RunUUID
	if runUUID == "" {
		runUUID = uuid.NewString()
	}
	log := e.log.With("workflow_type", string(def.Type), "workflow_run_uuid", runUUID, "trigger", string(req.Trigger))
	// Firestore keeps microseconds: the record read back must say the same time.
	initiated := e.now().UTC().Truncate(time.Microsecond)
	// The states before the body's are auto-advanced: the record is created in the last of them,
	// its history listing each, so starting a run costs one commit rather than one per state.
	state := len(def.States) - 2
	history := make([]runstore.StateEntry, 0, state+1)
	for _, s := range def.States[:state+1] {
		history = append(history, runstore.StateEntry{State: s.Name, At: initiated})
	}
	rec := runstore.RunRecord{
		WorkflowRunUUID: runUUID,
		WorkflowType:    string(def.Type),
		Status:          def.States[state].Name,
		Trigger:         string(req.Trigger),
		Actor:           req.Actor,
		ClaimedActor:    req.ClaimedActor,
		IncludeDisabled: req.Overrides.OptOut,
		InitialData:     stored,
		InitiatedAt:     initiated,
		UpdatedAt:       initiated,
		History:         history,
		Scope:           scope,
		OverridePause:   req.Overrides.Pause,
		// Until it finishes, a run is kept as if notable: one that never finishes still expires.
		ExpireAt: ledger.ExpiryAt(initiated, e.keep, true),
	}
	if paused != nil {
		log = log.With("paused", paused.String())
	}
	if req.DryRun {
		out := e.preview(ctx, def, input, req, rec, log)
		out.Paused = paused
		return out, nil
	}
	guard, err := e.start(ctx, def, input, rec, log, e.pauses != nil && !req.Overrides.Pause)
	if err != nil {
		return Outcome{RunUUID: runUUID}, err
	}

	run := Run{UUID: runUUID, Type: def.Type, Input: input, Trigger: req.Trigger, Actor: req.Actor, Logger: log,
		Overrides: req.Overrides}
	bodyCtx, cancelBody := context.WithCancelCause(ctx)
	bodyCtx = withBreaker(bodyCtx, cancelBody)
	stopRenewing := guard.renew(bodyCtx, cancelBody)
	res, bodyErr := e.runBody(bodyCtx, def.Body, run)
	// Renewal stops before the final write: if that write fails, the guard's lease runs out and
	// the next run closes the record.
	stopRenewing()
	switch cause := context.Cause(bodyCtx); {
	case errors.Is(cause, ErrStoreUnavailable):
		// Whatever the body made of its cancelled rows, the run stopped because the store is down.
		bodyErr = &StepError{Step: "settle", Layer: "firestore", Reason: "store_unavailable",
			Err: status.Errorf(codes.Unavailable, "%v: %d row transactions failed Unavailable or DeadlineExceeded in a row", cause, StoreBreakerThreshold)}
	case errors.Is(cause, runstore.ErrGuardLost) && bodyErr == nil:
		bodyErr = &StepError{Step: "guard", Layer: "workflow", Reason: "guard_lost", Err: cause}
	}
	cancelBody(nil)

	output, err := outputMap(res.Output)
	if err != nil && bodyErr == nil {
		bodyErr = &StepError{Step: "output", Layer: "workflow", Reason: "output_invalid", Err: err}
	}
	stats, _ := outputMap(res.Stats)
	at := e.now().UTC()
	upd := runstore.RunUpdate{Stats: stats, ReleaseGuard: guard.key}
	out := Outcome{RunUUID: runUUID, Stats: stats, Paused: paused}
	env := envelope{rec: rec}
	if bodyErr == nil {
		out.Status = StateCompleted
		upd.CompletedAt = at
		env.rec.CompletedAt = at
	} else {
		out.Status, out.Err = StateFailed, bodyErr
		upd.FailedAt = at
		upd.Failure = failure(bodyErr, def.States[state])
		env.rec.FailedAt, env.rec.Failure = at, upd.Failure
	}
	env.rec.Status = out.Status
	upd.Output = env.merge(maps.Clone(output), def.Envelope)
	upd.ExpireAt = ledger.ExpiryAt(at, e.keep, Notable(out.Status, stats))
	upd.NotableExpireAt = ledger.ExpiryAt(at, e.keep, true)
	from := []string{def.States[state].Name}
	if out.Status == StateFailed {
		from = nonTerminal(def.States)
	}
	err = e.record(ctx, func(ctx context.Context) error {
		return e.runs.TransitionRun(ctx, runUUID, from, out.Status, at, upd)
	})
	if err != nil {
		// The commit may have landed (its answer lost), or another writer may have ended the
		// record (a run that took the guard over, an operator): the record says how the run ended.
		if ended, ok := e.readBackEnd(ctx, runUUID); ok {
			if ended.Status != out.Status {
				log.Warn("the run's record was ended by another writer", "status", ended.Status, "error", err.Error())
			}
			env.rec = ended
			out.Status = ended.Status
			if ended.Status == StateCompleted {
				out.Err = nil
			}
			if ended.Status == StateFailed && ended.Failure != nil && (out.Err == nil || ended.Failure.Reason != upd.Failure.Reason) {
				out.Err = &StepError{Step: ended.Failure.Step, Layer: ended.Failure.Layer, Reason: ended.Failure.Reason, Err: errors.New(ended.Failure.Error)}
			}
		} else {
			log.Error("workflow run record not finished; its guard is left to expire, and the next run closes the record", "error", err.Error(), "status", out.Status)
			if out.Err == nil {
				out.Err = &StepError{Step: "finish", Layer: "firestore", Reason: "record_failed", Err: err}
			}
			out.Status = StateFailed
			env.rec.Status, env.rec.CompletedAt, env.rec.FailedAt = StateFailed, time.Time{}, at
			env.rec.Failure = failure(out.Err, def.States[state])
		}
	}
	// Built once the final status is known: a failed run carries failed_at, never completed_at.
	out.Output = env.merge(output, def.Envelope)
	e.summarize(log, out)
	return out, nil
}

// readBackEnd reads a run's record after a failed ending write: ok when it is terminal.
func (e *Engine) readBackEnd(ctx context.Context, runUUID string) (runstore.RunRecord, bool) {
	var rec runstore.RunRecord
	err := e.record(ctx, func(ctx context.Context) error {
		var err error
		rec, err = e.runs.GetRun(ctx, runUUID)
		return err
	})
	return rec, err == nil && (rec.Status == StateCompleted || rec.Status == StateFailed)
}

// preview runs the body as a dry run: no record, no guard, nothing written.
func (e *Engine) preview(ctx context.Context, def Definition, input json.RawMessage, req Request, rec runstore.RunRecord, log *slog.Logger) Outcome {
	log = log.With("dry_run", true)
	run := Run{UUID: rec.WorkflowRunUUID, Type: def.Type, Input: input, Trigger: req.Trigger, Actor: req.Actor, Logger: log,
		Overrides: req.Overrides, DryRun: true}
	res, bodyErr := e.runBody(ctx, def.Body, run)
	output, err := outputMap(res.Output)
	if err != nil && bodyErr == nil {
		bodyErr = &StepError{Step: "output", Layer: "workflow", Reason: "output_invalid", Err: err}
	}
	stats, _ := outputMap(res.Stats)
	out := Outcome{RunUUID: rec.WorkflowRunUUID, Stats: stats, Status: StateCompleted, DryRun: true}
	at := e.now().UTC()
	env := envelope{rec: rec}
	if bodyErr != nil {
		out.Status, out.Err = StateFailed, bodyErr
		env.rec.FailedAt, env.rec.Failure = at, failure(bodyErr, def.States[len(def.States)-2])
	} else {
		env.rec.CompletedAt = at
	}
	env.rec.Status = out.Status
	out.Output = env.merge(output, def.Envelope)
	e.summarize(log, out)
	return out
}

// heldGuard is the guard a run took, if any.
type heldGuard struct {
	e        *Engine
	log      *slog.Logger
	key      string // empty when the engine keeps no guards
	runUUID  string
	acquired time.Time
}

// renew renews the guard while the body works (see the package doc), cancelling the body with
// the *runstore.GuardLostError when the guard is lost. stop ends the renewal and waits for it.
func (g *heldGuard) renew(ctx context.Context, cancelBody context.CancelCauseFunc) (stop func()) {
	if g.key == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	lease, capAt := g.e.guardLease, g.acquired.Add(g.e.guardTTL)
	go func() {
		defer close(done)
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			until := g.e.now().UTC().Add(lease)
			if until.After(capAt) {
				until = capAt
			}
			rctx, rcancel := context.WithTimeout(ctx, lease/3)
			err := g.e.guards.Renew(rctx, g.key, g.runUUID, until)
			rcancel()
			switch {
			case errors.Is(err, runstore.ErrGuardLost):
				g.log.Error("the run lost its scope's guard: stopping it", "error", err.Error())
				cancelBody(err)
				return
			case err != nil && ctx.Err() == nil:
				g.log.Warn("guard lease not renewed; trying again", "error", err.Error())
			}
			if !until.Before(capAt) {
				return // the hard cap: the run's budget and margin are spent
			}
		}
	}()
	return func() { cancel(); <-done }
}

// start creates the run's record and takes its scope's guard in one transaction, closing the
// record of a run whose guard expired. With checkPauses it reads the pauses again, so a pause
// taken after Start's check still refuses the run.
func (e *Engine) start(ctx context.Context, def Definition, input json.RawMessage, rec runstore.RunRecord, log *slog.Logger, checkPauses bool) (*heldGuard, error) {
	runUUID := rec.WorkflowRunUUID
	held := &heldGuard{e: e, log: log, runUUID: runUUID, acquired: e.now().UTC()}
	var claim *runstore.GuardClaim
	scope := def.Scope.Key(input)
	if e.guards != nil {
		held.key = runstore.GuardKey(string(def.Type), scope)
		claim = &runstore.GuardClaim{Key: held.key, TTL: e.guardLease, Guard: runstore.Guard{
			WorkflowRunUUID: runUUID, WorkflowType: string(def.Type), Scope: scope, AcquiredAt: held.acquired,
			ExpireAt: rec.ExpireAt,
		}}
		if checkPauses {
			claim.Pauses = pausestore.PauseIDs(string(def.Type), scope)
		}
	}
	var expired *runstore.Guard
	err := e.record(ctx, func(ctx context.Context) error {
		var err error
		expired, err = e.runs.StartRun(ctx, rec, claim)
		return err
	})
	var busy *runstore.GuardHeldError
	var paused *runstore.PausedError
	if err != nil && firestoreconn.Ambiguous(err) { // a refusal the transaction decided wrote nothing
		if g, ok := e.startedAfterAll(ctx, rec, held.key); ok {
			// The commit landed and its answer was lost; the client's retry then failed (the
			// transaction closed). The run started.
			log.Warn("the start's commit was answered with an error but landed: the run goes on", "error", err.Error())
			err, expired = nil, nil
			if g != nil && g.TookOver != "" {
				expired = &runstore.Guard{WorkflowRunUUID: g.TookOver}
			}
		}
	}
	switch {
	case errors.As(err, &paused):
		return nil, pausedError(def.Type, scope, paused.Pause)
	case errors.As(err, &busy) && busy.Holder.WorkflowRunUUID == runUUID:
		return nil, &contract.Error{Code: contract.CodeConflict, Message: "run " + runUUID + " is already in progress", Err: ErrDuplicateRun}
	case errors.As(err, &busy):
		return nil, &contract.Error{
			Code:    contract.CodeConflict,
			Message: fmt.Sprintf("a run of %s on %s is in progress", def.Type, scope),
			Details: map[string]any{"workflow_run_uuid": busy.Holder.WorkflowRunUUID, "expires_at": busy.Holder.ExpiresAt.UTC().Format(time.RFC3339)},
			Err:     err,
		}
	case errors.Is(err, runstore.ErrRunExists):
		return nil, &contract.Error{Code: contract.CodeConflict, Message: "run " + runUUID + " has already started", Err: ErrDuplicateRun}
	case err != nil:
		return nil, err
	}
	if expired != nil && expired.WorkflowRunUUID != runUUID {
		at := e.now().UTC()
		abandoned := &runstore.Failure{
			Reason: "run_abandoned", Type: FailureTransient, Step: "guard", Layer: "workflow",
			Action: "fail", Error: "the run's guard expired before the run finished: its process died or overran its budget",
			ErrorType: "Abandoned",
		}
		err := e.record(ctx, func(ctx context.Context) error {
			return e.runs.TransitionRun(ctx, expired.WorkflowRunUUID, nonTerminal(def.States), StateFailed, at, runstore.RunUpdate{FailedAt: at, Failure: abandoned,
				ExpireAt: ledger.ExpiryAt(at, e.keep, true)})
		})
		switch {
		case err == nil:
			log.Warn("closed a run whose guard expired before it finished", "abandoned_workflow_run_uuid", expired.WorkflowRunUUID)
		case !errors.Is(err, runstore.ErrBadTransition) && status.Code(err) != codes.NotFound:
			log.Warn("could not close a run whose guard expired", "abandoned_workflow_run_uuid", expired.WorkflowRunUUID, "error", err.Error())
		}
	}
	return held, nil
}

// startedAfterAll reads back what a failed StartRun may have written: true when the record has
// this start's initiated_at (a redelivery has its own) and the guard, if any, names this run.
func (e *Engine) startedAfterAll(ctx context.Context, rec runstore.RunRecord, guardKey string) (*runstore.Guard, bool) {
	var got runstore.RunRecord
	var g *runstore.Guard
	err := e.record(ctx, func(ctx context.Context) error {
		var err error
		if got, err = e.runs.GetRun(ctx, rec.WorkflowRunUUID); err != nil || guardKey == "" {
			return err
		}
		g, err = e.guards.Get(ctx, guardKey)
		return err
	})
	if err != nil || !got.InitiatedAt.Equal(rec.InitiatedAt) {
		return nil, false
	}
	return g, guardKey == "" || (g != nil && g.WorkflowRunUUID == rec.WorkflowRunUUID)
}

// checkOptOut refuses, forbidden wrapping ErrOrganizationDisabled, a run of an
// organization that opted out.
func (e *Engine) checkOptOut(ctx context.Context, scope Scope, input json.RawMessage, includeDisabled bool) error {
	if e.orgs == nil || includeDisabled {
		return nil
	}
	org, ok := scope.Organization(input)
	if !ok {
		return nil
	}
	enabled, err := e.orgs.Enabled(ctx, org)
	switch {
	case err != nil:
		return &contract.Error{Code: contract.CodeInternal, Message: "could not read whether the organization opted out of sweeps", Err: err}
	case !enabled:
		return &contract.Error{
			Code:    contract.CodeForbidden,
			Message: fmt.Sprintf("organization %s has sweeps disabled (organizations/%s is missing or its sweeps_enabled is not true)", org, org),
			Err:     ErrOrganizationDisabled,
		}
	}
	return nil
}

// checkPause returns the pause covering the run, refusing it (conflict wrapping a
// *runstore.PausedError) unless it is a dry run or overrides the pause.
func (e *Engine) checkPause(ctx context.Context, typ contract.WorkflowType, scope string, req Request) (*pausestore.Pause, error) {
	if e.pauses == nil {
		return nil, nil
	}
	p, err := e.pauses.Covering(ctx, string(typ), scope, e.now())
	switch {
	case err != nil:
		return nil, &contract.Error{Code: contract.CodeInternal, Message: "could not read whether the workflow is paused", Err: err}
	case p == nil:
		return nil, nil
	case req.DryRun:
		e.log.Warn("dry run of a paused workflow: not refused, since it writes nothing", "workflow_type", string(typ), "scope", scope, "pause", p.String())
		return p, nil
	case req.Overrides.Pause:
		e.log.Warn("the workflow is paused on this scope; the run goes ahead as asked (override_pause)", "workflow_type", string(typ), "scope", scope, "pause", p.String(), "actor", req.Actor)
		return p, nil
	}
	return nil, pausedError(typ, scope, *p)
}

// pausedError is the conflict refusing a run that p covers, with the pause in its details.
func pausedError(typ contract.WorkflowType, scope string, p pausestore.Pause) error {
	details := map[string]any{"workflow_type": p.WorkflowType, "scope": p.Scope, "paused_by": p.PausedBy,
		"paused_at": p.PausedAt.UTC().Format(time.RFC3339), "reason": p.Reason}
	if !p.Until.IsZero() {
		details["until"] = p.Until.UTC().Format(time.RFC3339)
	}
	return &contract.Error{
		Code:    contract.CodeConflict,
		Message: pausedMessage(typ, scope, p),
		Details: map[string]any{"paused": details},
		Err:     &runstore.PausedError{Pause: p},
	}
}

// pausedMessage says why a run was refused, and how to go on.
func pausedMessage(typ contract.WorkflowType, scope string, p pausestore.Pause) string {
	on := p.ScopeName()
	if !p.Fleet() && p.Scope != scope {
		on += " (which covers " + scope + ")"
	}
	msg := fmt.Sprintf("%s is paused on %s by %s since %s", typ, on, p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339))
	if p.Reason != "" {
		msg += ": " + p.Reason
	}
	if !p.Until.IsZero() {
		msg += "; until " + p.Until.UTC().Format(time.RFC3339)
	}
	return msg
}

// runBody runs the body and turns a panic into a failure, so one bad row cannot take the
// process down with the record left in a non-terminal state.
func (e *Engine) runBody(ctx context.Context, body Body, run Run) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &StepError{Step: "body", Layer: "workflow", Reason: "panic", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return body(ctx, run)
}

// record runs a record write detached from ctx's cancellation, under its own timeout.
func (e *Engine) record(ctx context.Context, write func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.recordTO)
	defer cancel()
	return write(ctx)
}

func (e *Engine) summarize(log *slog.Logger, out Outcome) {
	attrs := []any{"status", out.Status, "output", out.Output}
	if out.Stats != nil {
		attrs = append(attrs, "stats", out.Stats)
	}
	if out.Err != nil {
		// failure_reason is the record's: the metric's label and the run's record agree.
		reason := failure(out.Err, State{}).Reason
		log.Error("workflow run failed", append(attrs, alerts.RunFailed.Attr(), "failure_reason", reason, "error", out.Err.Error())...)
		return
	}
	log.Info("workflow run completed", attrs...)
}

func nonTerminal(states []State) []string {
	out := make([]string, 0, len(states))
	for _, s := range states {
		if s.Action != "" {
			out = append(out, s.Name)
		}
	}
	return out
}

// outputMap marshals v, which must encode as a JSON object (or be nil), into a map whose
// integers are int64, as Firestore stores them.
func outputMap(v any) (map[string]any, error) {
	if v == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}, fmt.Errorf("encode output: %w", err)
	}
	if string(b) == "null" {
		return map[string]any{}, nil
	}
	m, err := runstore.StorableJSON(b)
	if err != nil {
		return map[string]any{}, fmt.Errorf("encode output: not an object: %w", err)
	}
	return m, nil
}

// envelope holds the record fields an output may echo.
type envelope struct{ rec runstore.RunRecord }

func (env envelope) merge(out map[string]any, fields []string) map[string]any {
	values := map[string]any{
		"workflow_run_uuid": env.rec.WorkflowRunUUID,
		"status":            env.rec.Status,
		"initiated_at":      timeString(env.rec.InitiatedAt),
		"completed_at":      timeString(env.rec.CompletedAt),
		"failed_at":         timeString(env.rec.FailedAt),
	}
	if env.rec.Actor != "" {
		values["actor_uuid"] = env.rec.Actor
	}
	if f := env.rec.Failure; f != nil {
		for k, v := range map[string]string{
			"failure_reason": f.Reason, "failure_type": f.Type, "failed_step": f.Step, "failed_layer": f.Layer,
			"failed_at_state": f.AtState, "failed_action": f.Action, "error": f.Error, "error_type": f.ErrorType,
		} {
			values[k] = v
		}
	}
	for _, f := range fields {
		if v, ok := values[f]; ok && v != "" && v != nil {
			out[f] = v
		}
	}
	return out
}

func timeString(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// IsValidation reports whether err is a rejected input.
func IsValidation(err error) bool {
	var ve *contract.ValidationError
	return errors.As(err, &ve)
}
