package executionsync

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// SyncOutcome is how one sync ended.
type SyncOutcome string

// The sync outcomes.
const (
	SyncSettled   SyncOutcome = "settled"
	SyncRefreshed SyncOutcome = "refreshed"
	SyncUnknown   SyncOutcome = "unknown"
	SyncRaced     SyncOutcome = "raced"     // the row changed since the scan: nothing written
	SyncErrored   SyncOutcome = "errored"   // the executor or Firestore failed: nothing settled
	SyncDeferred  SyncOutcome = "deferred"  // not attempted: executor stopped or budget spent
	SyncPublished SyncOutcome = "published" // handed to another process (the pipeline)
	SyncDuplicate SyncOutcome = "duplicate" // this run already decided this row: nothing written
	SyncRefused   SyncOutcome = "refused"   // not this request's to write (Why names the rule): nothing written
	SyncNotEnded  SyncOutcome = "not_ended" // the event path: the executor does not say it ended, nothing written
)

// SyncResult is one sync's end.
type SyncResult struct {
	RunnerExecutionUUID string
	Outcome             SyncOutcome
	Settled             string // the outcome written, when Outcome is SyncSettled
	Why                 string // for raced, deferred and refused: why
	Err                 error  // for errored
	Layer               string // for errored: "executor", "firestore", or "pubsub"
	Target              string // for unknown rows held by the blind-executor guard: the target
	Reason              string // for settled: the settlement's reason (executor_terminal, executor_lost)
	// Answered: the executor answered the sync's call (NotFound included).
	Answered bool
}

// Layers a sync can fail in.
const (
	LayerExecutor  = "executor"
	LayerFirestore = "firestore"
	LayerPubSub    = "pubsub"
)

// Started reports whether the sync reached a decision (the seed's "started").
func (r SyncResult) Started() bool {
	return r.Outcome != SyncErrored && r.Outcome != SyncDeferred
}

// Transient reports whether a sync that ended so is worth delivering again.
func (r SyncResult) Transient() bool {
	switch r.Outcome {
	case SyncDeferred:
		return true
	case SyncErrored:
		switch status.Code(r.Err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Aborted, codes.ResourceExhausted, codes.Unknown:
			return true
		}
	}
	return false
}

// Store is what the execution-sync workflow reads and writes of the runner_executions ledger.
type Store interface {
	// Scan returns one page of an organization's stale active rows of one provider, oldest first.
	Scan(ctx context.Context, q ledger.ScanQuery) ([]ledger.Execution, *ledger.Cursor, error)
	// StaleOrganizations returns which of orgs (at most firestoreconn.InMax) have a row Scan would return.
	StaleOrganizations(ctx context.Context, orgs []string, provider string, horizon time.Time) ([]string, error)
	Invisible(ctx context.Context, org, provider string) (ledger.Invisible, error)
	Apply(ctx context.Context, uuid string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, error)
	// ApplyOnce is Apply with a receipt for (run, row) written in the same transaction.
	ApplyOnce(ctx context.Context, runUUID, uuid string, reads ledger.Reads, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, bool, error)
	// Peek is Apply's reads with nothing written: what a dry run and explain decide on.
	Peek(ctx context.Context, uuid string, reads ledger.Reads) (ledger.Peeked, error)
}

// Syncer syncs one row: one executor call, then one transaction.
type Syncer struct {
	store     Store
	exec      executor.Executor
	typ       contract.WorkflowType
	provider  string
	now       func() time.Time
	grace     time.Duration
	log       *slog.Logger
	judge     TargetJudge // nil: no blind-executor guard
	keepAlive time.Duration
}

// TargetJudge judges whether an executor target is blind; *blindguard.Guard is one.
type TargetJudge interface {
	Judge(ctx context.Context, target string, now time.Time) (ledger.Target, error)
	Assess(ctx context.Context, target string, now time.Time) (ledger.Target, error)
}

// keepAliveOf is half the guard's window, so that a row held unknown never drops out of the
// guard's count.
func keepAliveOf(j TargetJudge) time.Duration {
	window := blindguard.WindowDefault
	if w, ok := j.(interface{ Window() time.Duration }); ok && w.Window() > 0 {
		window = w.Window()
	}
	return window / 2
}

// SyncerConfig builds a Syncer.
type SyncerConfig struct {
	Store     Store
	Executor  executor.Executor
	Kind      Kind
	Now       func() time.Time
	LostGrace time.Duration
	Log       *slog.Logger
	// Guard, when not nil, is the blind-executor guard: no row is settled lost unless a fresh
	// judgment of its target, read in the row's transaction, says it is not blind.
	Guard TargetJudge
}

// NewSyncer returns the syncer c describes, its zero values filled with their defaults.
func NewSyncer(c SyncerConfig) *Syncer {
	s := &Syncer{store: c.Store, exec: c.Executor, typ: c.Kind.Type, provider: c.Kind.Provider, now: c.Now,
		grace: cmp.Or(c.LostGrace, LostGraceDefault), log: c.Log, judge: c.Guard, keepAlive: keepAliveOf(c.Guard)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Sync observes the row's execution and applies the decision; it never panics on a bad row.
func (s *Syncer) Sync(ctx context.Context, req message.Sync) SyncResult {
	return s.sync(ctx, req, mode{})
}

// SyncOnce is Sync for a request that may be delivered more than once (a Pub/Sub message). A
// message is outside input: its transaction also checks the run it names.
func (s *Syncer) SyncOnce(ctx context.Context, req message.Sync) SyncResult {
	return s.sync(ctx, req, mode{once: true})
}

// Ended is a completion entry that named a row's execution (the event path): its settlement
// carries them, and WorkflowRunUUID the id EndedRunID derives from them.
type Ended struct {
	Log      string // the entry's log name
	InsertID string
}

// Evidence keys of a settlement made on the event path.
const (
	EvidencePath     = "path" // "event"
	EvidenceLog      = "event_log"
	EvidenceInsertID = "event_insert_id"
)

// SettleEnded is the event path's sync of a row an executor's completion entry named: the same
// guarded transaction as Sync (organization, provider, opt-out and pause), with no age asked,
// that settles only on the executor's terminal word. A row the executor says still runs, does not
// know, or could not be asked about is left as it is, nothing written: the sweep settles it later.
// req.WorkflowRunUUID is the entry's own id, so that a second delivery reads its settlement back.
func (s *Syncer) SettleEnded(ctx context.Context, req message.Sync, ended Ended) SyncResult {
	return s.sync(ctx, req, mode{ended: &ended})
}

// mode is how a sync runs.
type mode struct {
	ended *Ended // the event path (SettleEnded)
	once  bool
	// callFailed hears of a failed call before the row is written: a run that stops its executor
	// calls on that error must not keep calling while the row is being written.
	callFailed func(error)
	dry        *dryRun
}

func (s *Syncer) sync(ctx context.Context, req message.Sync, m mode) SyncResult {
	snap, err := s.exec.Observe(ctx, req.ProviderRef)
	return s.settle(ctx, req, snap, err, m)
}

func (s *Syncer) settle(ctx context.Context, req message.Sync, snap executor.Snapshot, err error, m mode) SyncResult {
	once, callFailed := m.once, m.callFailed
	res := SyncResult{RunnerExecutionUUID: req.RunnerExecutionUUID}
	trust := Trust{
		Type: s.typ, Provider: s.provider, CheckOptOut: !req.IncludeDisabled, CheckRun: once,
		Organization: req.OrganizationUUID, RunnerExecution: req.RunnerExecutionUUID,
		CheckPause: !req.OverridePause,
	}
	var reads ledger.Reads
	if trust.CheckOptOut {
		reads.Organization = req.OrganizationUUID
	}
	if trust.CheckRun {
		reads.Run = req.WorkflowRunUUID
	}
	if trust.CheckPause {
		// A pause taken while the run's syncs are in flight stops the ones not yet written.
		reads.Pauses = pausestore.PauseIDs(string(s.typ), req.OrganizationUUID)
	}
	target := s.exec.Target(req.ProviderRef)
	var assessed *ledger.Target
	apply := func(decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, bool, error) {
		checked := func(row ledger.Execution, facts ledger.Facts) ledger.ExecutionChange {
			trust := trust
			trust.Now = s.now()
			if why := refuse(row, facts, trust); why != "" {
				return ledger.ExecutionChange{Kind: ledger.ChangeRefused, Why: why}
			}
			ch := decide(row, facts)
			if ch.Kind == ledger.ChangeSettle || ch.Kind == ledger.ChangeRefresh || ch.Kind == ledger.ChangeUnknown {
				ch.Target = target
			}
			ch.Quiet = quiet(row, ch, s.keepAlive)
			return ch
		}
		if m.dry != nil {
			ch, err := s.peek(ctx, req.RunnerExecutionUUID, reads, assessed, checked)
			return ch, false, err
		}
		if once {
			return s.store.ApplyOnce(ctx, req.WorkflowRunUUID, req.RunnerExecutionUUID, reads, checked)
		}
		ch, err := s.store.Apply(ctx, req.RunnerExecutionUUID, reads, checked)
		return ch, false, err
	}
	log := s.log.With("workflow_run_uuid", req.WorkflowRunUUID, "organization_uuid", req.OrganizationUUID,
		"runner_execution_uuid", req.RunnerExecutionUUID)
	// A dry run's lines say what would happen, so that no filter on a real run's lines counts them.
	say := func(msg string) string { return msg }
	if m.dry != nil {
		log = log.With("dry_run", true)
		say = func(msg string) string { return "dry run: " + msg }
	}
	seen := Seen{ObservedAt: req.ObservedAt, ProviderRef: req.ProviderRef}
	res.Answered = err == nil

	if err != nil {
		if ctx.Err() != nil {
			res.Outcome, res.Why = SyncDeferred, "budget_spent"
			return res
		}
		if m.ended != nil { // the sweep records a failed call; an event asks for redelivery
			res.Outcome, res.Err, res.Layer = SyncErrored, err, LayerExecutor
			return res
		}
		if callFailed != nil {
			callFailed(err)
		}
		res.Outcome, res.Err, res.Layer = SyncErrored, err, LayerExecutor
		log.Warn(say("executor call failed; nothing settled"), "error", err.Error(), "code", status.Code(err).String())
		ch, _, aerr := apply(func(row ledger.Execution, _ ledger.Facts) ledger.ExecutionChange {
			if why := moved(row, seen); why != "" {
				return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: why}
			}
			return ledger.ExecutionChange{Kind: ledger.ChangeError, At: s.now(), Error: status.Code(err).String() + ": " + err.Error()}
		})
		switch {
		case aerr != nil:
			log.Warn("recording the executor error failed", "error", aerr.Error())
		case ch.Kind == ledger.ChangeRefused:
			res = refused(res, ch.Why, log)
		}
		return res
	}

	// Once the row is written, the target's judgment is kept current, so that a healthy target is
	// listed too.
	if seer, ok := s.judge.(interface {
		Seen(context.Context, string, time.Time)
	}); ok && m.dry == nil && m.ended == nil && target != "" {
		defer func() { seer.Seen(ctx, target, s.now()) }()
	}

	// Only a NotFound can end in a lost settlement: only then does the transaction read the
	// target's judgment.
	guarded := s.judge != nil && snap.Verdict == executor.VerdictUnknown && target != "" && m.ended == nil
	if guarded {
		reads.Target = target
	}
	var ch ledger.ExecutionChange
	var duplicate bool
	for judged := false; ; judged = true {
		ch, duplicate, err = apply(func(row ledger.Execution, facts ledger.Facts) ledger.ExecutionChange {
			now := s.now()
			view := targetView{guarded: guarded, fresh: blindguard.Fresh(facts.Target, now), blind: facts.Target != nil && facts.Target.Blind}
			ch := decide(row, seen, snap, now, s.grace, req.WorkflowRunUUID, view)
			if m.ended != nil {
				return endedOnly(ch, *m.ended)
			}
			return ch
		})
		if err != nil || judged || ch.Kind != ledger.ChangeNone || ch.Why != WhyTargetUnjudged {
			break
		}
		if m.dry != nil {
			t, jerr := m.dry.assess(ctx, s.judge, target, s.now())
			if jerr != nil {
				err = jerr
				break
			}
			assessed = &t
			continue
		}
		if _, jerr := s.judge.Judge(ctx, target, s.now()); jerr != nil {
			err = jerr
			break
		}
	}
	if err != nil && m.dry == nil {
		// The commit may have landed though its answer was lost: the row says.
		if back, rerr := s.readBack(ctx, req.RunnerExecutionUUID, req.WorkflowRunUUID); rerr == nil && back.Why == WhySettledByThisRun {
			ch, err = back, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil { // the run's budget ended the transaction, and the row does not carry its settlement
			res.Outcome, res.Why = SyncDeferred, "budget_spent"
			return res
		}
		res.Outcome, res.Err, res.Layer = SyncErrored, err, LayerFirestore
		log.Warn("settling transaction failed; nothing settled", "error", err.Error())
		return res
	}
	path := PathSweep // what the row_settled line says settled it: alerts.EventPathMissed counts the sweep's terminal ones
	if m.ended != nil {
		path = PathEvent
	}
	switch {
	case ch.Kind == ledger.ChangeRefused:
		res = refused(res, ch.Why, log)
	case duplicate:
		res.Outcome, res.Why = SyncDuplicate, "receipt_exists"
		log.Info("sync already decided by this run; duplicate delivery ignored")
	case ch.Kind == ledger.ChangeNone && ch.Why == WhyEntrySettled:
		res.Outcome, res.Why = SyncDuplicate, WhyEntrySettled
		log.Info("the row already carries this completion entry's settlement; duplicate delivery ignored")
	case ch.Kind == ledger.ChangeNone && ch.Why == WhySettledByThisRun:
		res.Outcome, res.Settled, res.Reason = SyncSettled, ch.Outcome, ch.Settlement.Reason
		log.Info(say("runner execution settled; this run's commit landed though its answer was lost (read back)"), alerts.RowSettled.Attr(), "workflow_type", string(s.typ), "outcome", ch.Outcome, "reason", ch.Settlement.Reason, "path", path)
	case ch.Kind == ledger.ChangeSettle:
		res.Outcome, res.Settled, res.Reason = SyncSettled, ch.Outcome, ch.Settlement.Reason
		log.Info(say("runner execution settled"), alerts.RowSettled.Attr(), "workflow_type", string(s.typ), "outcome", ch.Outcome, "reason", ch.Settlement.Reason, "path", path, "verdict", ch.Verdict)
	case ch.Kind == ledger.ChangeNone && ch.Why == WhyNotEnded:
		res.Outcome, res.Why = SyncNotEnded, WhyNotEnded
		log.Info("completion entry for an execution the executor does not say ended; nothing written", "verdict", string(snap.Verdict))
	case ch.Kind == ledger.ChangeRefresh:
		res.Outcome = SyncRefreshed
		log.Debug(say("runner execution still running; observed_at refreshed"))
	case ch.Kind == ledger.ChangeUnknown && ch.Why == WhyBlindExecutor:
		res.Outcome, res.Why, res.Target = SyncUnknown, WhyBlindExecutor, target
		log.Warn(say("runner execution unknown to a blind executor target; not settled lost"), "target", target, "unknown_since", ch.UnknownSince)
	case ch.Kind == ledger.ChangeUnknown:
		res.Outcome = SyncUnknown
		log.Info(say("runner execution unknown to the executor; waiting out the grace"), "unknown_since", ch.UnknownSince)
	default:
		res.Outcome, res.Why = SyncRaced, ch.Why
		log.Debug(say("runner execution changed since the scan; left alone"), "why", ch.Why)
	}
	return res
}

// The paths a row_settled line names (its "path" field): a sweep's sync, or a completion entry.
const (
	PathSweep = alerts.PathSweep
	PathEvent = alerts.PathEvent
)

// Why the event path wrote nothing: the executor call does not show the execution terminal, or
// the row already carries this entry's settlement.
const (
	WhyNotEnded     = "not_ended"
	WhyEntrySettled = "entry_settled"
)

// endedOnly is the event path's rule over decide's change: a settlement on the executor's
// terminal word stands, marked with the entry; a change that writes nothing stands; any other
// (a refresh, an unknown spell, a lost settlement) is nothing written. It is pure.
func endedOnly(ch ledger.ExecutionChange, e Ended) ledger.ExecutionChange {
	switch {
	case ch.Kind == ledger.ChangeSettle && ch.Settlement != nil && ch.Settlement.Reason == ReasonExecutorTerminal:
		ch.Settlement.Evidence[EvidencePath] = PathEvent
		ch.Settlement.Evidence[EvidenceLog] = e.Log
		ch.Settlement.Evidence[EvidenceInsertID] = e.InsertID
		return ch
	case ch.Kind == ledger.ChangeNone && ch.Why == WhySettledByThisRun:
		return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: WhyEntrySettled} // a second delivery of the entry
	case ch.Kind == ledger.ChangeNone || ch.Kind == ledger.ChangeRefused:
		return ch
	}
	return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: WhyNotEnded}
}

// ReadBackTimeout bounds readBack of a row whose settling transaction failed.
const ReadBackTimeout = 2 * time.Second

// readBack reads the row apart from ctx's deadline (a budget that ended mid-commit leaves the
// question open too) but within ReadBackTimeout.
func (s *Syncer) readBack(ctx context.Context, uuid, runUUID string) (ledger.ExecutionChange, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReadBackTimeout)
	defer cancel()
	p, err := s.store.Peek(ctx, uuid, ledger.Reads{})
	if err != nil || !p.Found {
		return ledger.ExecutionChange{}, err
	}
	ch, _ := settledBy(p.Row, runUUID)
	return ch, nil
}

// refused ends a sync whose transaction refused to write, logging why.
func refused(res SyncResult, why string, log *slog.Logger) SyncResult {
	res.Outcome, res.Why, res.Err = SyncRefused, why, nil
	switch why {
	case RefuseDisabled:
		log.Warn("the organization has opted out of sweeps; nothing written", "refused", why)
	case RefusePaused:
		log.Warn("the workflow is paused on this organization; nothing written", "refused", why)
	default:
		log.Error("sync refused: the row or the run it names is not this sync's to write; nothing written", "refused", why)
	}
	return res
}

// stopsCalls is the executor package's rule (executor.Stops).
func stopsCalls(err error) (string, bool) { return executor.Stops(err) }
