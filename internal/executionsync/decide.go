package executionsync

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// Seen is the row as the scan saw it: the state a sync's decision is made on.
type Seen struct {
	ObservedAt  time.Time
	ProviderRef map[string]any
}

// ReasonDecidedThenGone settles a row whose executor had decided its outcome while it finished
// (sync.pending_outcome) and then stopped knowing it: settled with that outcome, not lost.
const ReasonDecidedThenGone = "executor_decided_then_gone"

// Settlement reasons.
const (
	ReasonExecutorTerminal = "executor_terminal"    // the executor reports the execution over
	ReasonLost             = "executor_lost"        // unknown to the executor past the grace
	WhyNotActive           = "not_active"           // someone settled the row already
	WhyObservedAtMoved     = "observed_at_moved"    // someone confirmed it since the scan
	WhyProviderRefChanged  = "provider_ref_changed" // it points at another execution now
	// WhySettledByThisRun: the row carries this run's own settlement, from a commit whose answer
	// was lost (a retry found its transaction closed, or a deadline fell after it was sent).
	WhySettledByThisRun = "settled_by_this_run"
	// WhyTargetUnjudged: the row would be settled lost, but its executor target has no fresh
	// judgment (internal/blindguard): nothing written; the sync judges it and decides again.
	WhyTargetUnjudged = "target_unjudged"
	// WhyBlindExecutor: the row would be settled lost, but its target is blind: it stays unknown.
	WhyBlindExecutor = "blind_executor"
)

// targetView is the row's executor target's judgment as the row's transaction read it.
type targetView struct{ guarded, fresh, blind bool }

// Refusal reasons: the rules about who may write a row, checked in the row's own transaction on
// what it read there (refuse). A refused sync writes nothing, not even a receipt.
const (
	RefuseOtherOrganization = "organization_mismatch"       // the row is another organization's
	RefuseOtherProvider     = "provider_mismatch"           // the row is another executor's
	RefuseDisabled          = "organization_disabled"       // the organization opted out of sweeps
	RefuseRunMissing        = "run_missing"                 // the message names no run that exists
	RefuseRunOtherWorkflow  = "run_of_another_workflow"     // the run is not this workflow's
	RefuseRunOtherScope     = "run_of_another_organization" // the run swept another organization
	RefuseRunDidNotStart    = "run_did_not_start_it"        // the run finished without starting this sync
	RefusePaused            = "paused"                      // the workflow is paused on the row's organization, or fleet-wide
)

// Trust is the request's claims and the rules a sync's transaction checks before it writes.
type Trust struct {
	Type            contract.WorkflowType // the workflow the syncer serves
	Provider        string                // the rows' provider it syncs
	CheckOptOut     bool                  // the organization must not have opted out
	CheckRun        bool                  // the named run must exist and have started this sync
	Organization    string                // the organization the request names
	RunnerExecution string                // the row the request names
	// CheckPause: no pause read in the transaction (ledger.Facts.Pauses) may hold at Now.
	CheckPause bool
	Now        time.Time
}

// refuse says which rule about who may write row the request breaks, on what the transaction
// read; "" when none. It is pure.
func refuse(row ledger.Execution, facts ledger.Facts, t Trust) string {
	switch {
	case row.OrganizationUUID != t.Organization:
		return RefuseOtherOrganization
	case row.Provider != t.Provider:
		return RefuseOtherProvider
	case t.CheckOptOut && !facts.OrganizationEnabled:
		return RefuseDisabled
	case t.CheckPause && pausestore.ActivePause(facts.Pauses, t.Now) != nil:
		return RefusePaused
	}
	if !t.CheckRun {
		return ""
	}
	run := facts.Run
	switch {
	case run == nil:
		return RefuseRunMissing
	case run.WorkflowType != string(t.Type):
		return RefuseRunOtherWorkflow
	case run.Organization != t.Organization:
		return RefuseRunOtherScope
	case run.Status == workflow.StateReconciling:
		return "" // still publishing its syncs: its output is not written yet
	case !slices.Contains(run.Started, t.RunnerExecution):
		return RefuseRunDidNotStart
	}
	return ""
}

// decide is the settling rule (docs/architecture.md's table) for row as read inside its
// transaction; it is pure.
func decide(row ledger.Execution, seen Seen, snap executor.Snapshot, now time.Time, grace time.Duration, runUUID string, target targetView) ledger.ExecutionChange {
	if ch, ok := settledBy(row, runUUID); ok {
		return ch
	}
	if why := moved(row, seen); why != "" {
		return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: why}
	}
	ch := ledger.ExecutionChange{At: now, Verdict: string(snap.Verdict)}
	switch v := snap.Verdict; {
	case v.Terminal():
		ch.Kind = ledger.ChangeSettle
		ch.Status, ch.Outcome = string(v), string(v) // the verdicts are named as statuses and outcomes
		ch.CompletedAt = snap.FinishedAt
		if ch.CompletedAt.IsZero() {
			ch.CompletedAt = now
		}
		if v != executor.VerdictSucceeded {
			ch.FailureReason = snap.Reason
		}
		ch.Settlement = settlement(row, snap, now, runUUID, ReasonExecutorTerminal)
	case v == executor.VerdictUnknown && executor.Verdict(row.Sync.PendingOutcome).Terminal():
		// The executor said how it ends before it stopped knowing it, and that word cannot be taken
		// back, so NotFound adds nothing to doubt and no grace or guard applies.
		pending := executor.Verdict(row.Sync.PendingOutcome)
		ch.Kind = ledger.ChangeSettle
		ch.Status, ch.Outcome = string(pending), string(pending)
		ch.CompletedAt = now
		if pending != executor.VerdictSucceeded {
			ch.FailureReason = fmt.Sprintf("the executor had decided the execution %s when it was last seen, and no longer knows it", pending)
		}
		ch.Settlement = settlement(row, snap, now, runUUID, ReasonDecidedThenGone)
		ch.Settlement.Evidence["pending_outcome"] = string(pending)
		if row.Sync.LastSnapshot != nil {
			ch.Settlement.Evidence["last_snapshot"] = row.Sync.LastSnapshot
		}
	case v == executor.VerdictUnknown:
		since := row.Sync.UnknownSince
		if since.IsZero() || since.After(now) {
			since = now
		}
		if now.Sub(since) < grace {
			ch.Kind, ch.UnknownSince = ledger.ChangeUnknown, since
			return ch
		}
		// Past the grace: NotFound is evidence only while the executor looks at the right place.
		switch {
		case target.guarded && !target.fresh:
			return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: WhyTargetUnjudged}
		case target.guarded && target.blind:
			ch.Kind, ch.UnknownSince, ch.Why = ledger.ChangeUnknown, since, WhyBlindExecutor
			return ch
		}
		ch.Kind = ledger.ChangeSettle
		ch.Status, ch.Outcome = ledger.StatusFailed, ledger.OutcomeLost
		ch.CompletedAt = now
		ch.FailureReason = fmt.Sprintf("the executor has not known the execution since %s (grace %s)", since.UTC().Format(time.RFC3339), grace)
		ch.Settlement = settlement(row, snap, now, runUUID, ReasonLost)
		ch.Settlement.Evidence["unknown_since"] = since
		if row.Sync.LastSnapshot != nil {
			// NotFound says nothing of the execution: what the executor said last, does.
			ch.Settlement.Evidence["last_snapshot"] = row.Sync.LastSnapshot
		}
	default: // running, and anything an adapter cannot place, keeps the row alive
		ch.Kind = ledger.ChangeRefresh
		ch.Verdict = string(executor.VerdictRunning)
		ch.PendingOutcome = string(snap.Pending)
		ch.Snapshot = maps.Clone(snap.Evidence)
		if ch.Snapshot == nil {
			ch.Snapshot = map[string]any{}
		}
		ch.Snapshot["seen_at"] = now
	}
	return ch
}

// quiet reports whether ch would write only what row already holds, row having been written
// less than keepAlive before ch (doc.go: a sync that learns nothing writes nothing). It is pure.
func quiet(row ledger.Execution, ch ledger.ExecutionChange, keepAlive time.Duration) bool {
	last := row.Sync.LastSyncedAt
	return ch.Kind == ledger.ChangeUnknown &&
		row.Sync.LastVerdict == string(executor.VerdictUnknown) &&
		!row.Sync.UnknownSince.IsZero() && row.Sync.UnknownSince.Equal(ch.UnknownSince) &&
		row.Sync.Target == ch.Target &&
		!last.IsZero() && !last.After(ch.At) && ch.At.Sub(last) < keepAlive
}

// settledBy reports whether row carries the settlement of run runUUID, and the change that says so.
func settledBy(row ledger.Execution, runUUID string) (ledger.ExecutionChange, bool) {
	if row.Active || row.Settlement == nil || runUUID == "" || row.Settlement.WorkflowRunUUID != runUUID {
		return ledger.ExecutionChange{}, false
	}
	return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: WhySettledByThisRun, Outcome: row.Outcome, Settlement: row.Settlement}, true
}

// moved says why row is no longer the row the scan saw, or "" if it still is.
func moved(row ledger.Execution, seen Seen) string {
	switch {
	case !row.Active:
		return WhyNotActive
	case !row.ObservedAt.Equal(seen.ObservedAt):
		return WhyObservedAtMoved
	case !reflect.DeepEqual(row.ProviderRef, seen.ProviderRef):
		return WhyProviderRefChanged
	}
	return ""
}

func settlement(row ledger.Execution, snap executor.Snapshot, now time.Time, runUUID, reason string) *ledger.Settlement {
	ev := maps.Clone(snap.Evidence)
	if ev == nil {
		ev = map[string]any{}
	}
	ev["row_observed_at"] = row.ObservedAt
	ev["verdict"] = string(snap.Verdict)
	return &ledger.Settlement{At: now, WorkflowRunUUID: runUUID, Reason: reason, Evidence: ev}
}
