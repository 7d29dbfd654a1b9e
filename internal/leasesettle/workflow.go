package leasesettle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// Reasons a lease is abandoned or kept.
const (
	ReasonHolderTerminal          = "holder_terminal"
	ReasonHolderUnresolvableStale = "holder_unresolvable_heartbeat_stale"
	KeepHolderAlive               = "holder_alive"
	KeepHeartbeatFresh            = "holder_unresolvable_heartbeat_fresh"
	KeepNotActive                 = "not_active"
)

// EnvelopeLeaseSettle lists the record fields seed 004's output echoes.
var EnvelopeLeaseSettle = []string{
	"workflow_run_uuid", "status", "initiated_at", "completed_at", "failed_at", "actor_uuid",
	"failure_reason", "error", "error_type", "failed_step", "failed_layer", "failed_at_state",
}

// Decide is the whole rule for one lease, given its holder as read and the group's timeout.
func Decide(l ledger.WorkspaceLease, holder ledger.HolderView, now time.Time, timeout time.Duration) (abandon bool, why string) {
	switch {
	case l.Status != ledger.LeaseActive:
		return false, KeepNotActive
	case holder.Resolved && ledger.InstanceTerminal(holder.Status):
		return true, ReasonHolderTerminal
	case holder.Resolved:
		return false, KeepHolderAlive
	case now.Sub(l.HeartbeatAt) > timeout:
		return true, ReasonHolderUnresolvableStale
	default:
		return false, KeepHeartbeatFresh
	}
}

// Store is what the workflow needs of the ledger; *ledger.LeaseStore has it.
type Store interface {
	GetGroup(ctx context.Context, id string) (ledger.RunnerGroup, error)
	ScanActive(ctx context.Context, org, group string, after *ledger.Cursor, limit int) ([]ledger.WorkspaceLease, error)
	Instances(ctx context.Context, ids []string) (map[string]ledger.RunnerInstance, error)
	AbandonLease(ctx context.Context, leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error)
	PreviewAbandonLease(ctx context.Context, leaseID string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error)
	CountActive(ctx context.Context, org, group string, before time.Time) (int64, error)
	Invisible(ctx context.Context, org, group string) (ledger.Invisible, error)
}

// Workflow is runner.workspace-lease-settle.
type Workflow struct{ agesweep.Sweep[Store, Config] }

// New returns the workflow.
func New(store Store, cfg Config, clock firestoreconn.Clock) *Workflow {
	return &Workflow{agesweep.New(store, cfg, clock)}
}

// Declared is the workflow's declaration: one run covers one runner group of one organization.
var Declared = workflow.Declaration{Type: contract.WorkspaceLeaseSettle, Scope: workflow.ScopeRunnerGroup, FromRequest: true, AgeBased: true}

// Definition returns the workflow as the engine runs it: atomic, as seed 004 says.
func (w *Workflow) Definition() workflow.Definition {
	return workflow.Definition{
		Declaration: Declared, States: workflow.Atomic, Envelope: EnvelopeLeaseSettle,
		Check: w.check, Probe: workflow.ProbeEach(w.probe), Body: agesweep.Body(w.RunOnce),
	}
}

// probe: a runner group has work when it has an active lease. Whether a lease is abandoned
// depends on its holder, not on its age alone, so a group with live leases is never quiet.
func (w *Workflow) probe(ctx context.Context, input json.RawMessage, _ time.Time) (bool, error) {
	var in Input
	if err := json.Unmarshal(input, &in); err != nil {
		return false, err
	}
	active, err := w.Store.ScanActive(ctx, in.OrganizationUUID, in.RunnerGroupUUID, nil, 1)
	return len(active) > 0, err
}

// check refuses a group it cannot settle before anything is written.
func (w *Workflow) check(ctx context.Context, input json.RawMessage, _ workflow.Trigger) error {
	var in Input
	if err := json.Unmarshal(input, &in); err != nil {
		return contract.Invalid("initial_data", "type", "%v", err)
	}
	g, err := w.Store.GetGroup(ctx, in.RunnerGroupUUID)
	switch {
	case errors.Is(err, ledger.ErrGroupNotFound):
		return contract.Invalid("runner_group_uuid", "exists", "no runner group %s exists", in.RunnerGroupUUID)
	case err != nil:
		return err
	case g.OrganizationUUID != in.OrganizationUUID:
		return contract.Invalid("runner_group_uuid", "organization", "runner group %s does not belong to organization %s", in.RunnerGroupUUID, in.OrganizationUUID)
	case g.HeartbeatTimeoutSeconds <= 0:
		return contract.Invalid("runner_group_uuid", "heartbeat_timeout_seconds",
			"runner group %s has no positive heartbeat_timeout_seconds; without one no lease can be judged stale", in.RunnerGroupUUID)
	}
	return nil
}

// Refusal reasons: rules about who may write a lease, checked in its transaction.
const (
	RefuseOtherOrganization = "organization_mismatch" // the lease is not the run's organization's
	RefuseOtherGroup        = "runner_group_mismatch" // nor its runner group's
	RefuseDisabled          = "organization_disabled" // the organization opted out of sweeps
	// RefusePaused: the ledger checks it, before Refuse, on the pauses the transaction read.
	RefusePaused = string(ledger.LeftPaused)
)

// Refuse says which rule about who may write l a run over in breaks, reading facts as its
// transaction read them; "" when none. includeDisabled is the operator's --include-disabled.
func Refuse(l ledger.WorkspaceLease, in Input, facts ledger.Facts, includeDisabled bool) string {
	switch {
	case l.OrganizationUUID != in.OrganizationUUID:
		return RefuseOtherOrganization
	case l.RunnerGroupUUID != in.RunnerGroupUUID:
		return RefuseOtherGroup
	case !includeDisabled && !facts.OrganizationEnabled:
		return RefuseDisabled
	}
	return ""
}

// RunOnce is one run over one group. run.Overrides.Storm lets it go ahead where the storm guard
// would stop it; run.Overrides.OptOut lets it settle an organization that opted out.
//
// It reads on past max_settlements candidates while heartbeats are stale, so that the storm
// guard counts every lease it would abandon on age alone (up to MaxExamined); only then does
// anything get written.
func (w *Workflow) RunOnce(ctx context.Context, run workflow.Run, in Input) (Output, Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Config.Budget)
	defer cancel()
	log := run.Logger.With("organization_uuid", in.OrganizationUUID, "runner_group_uuid", in.RunnerGroupUUID)
	out := Output{RunnerGroupUUID: in.RunnerGroupUUID, OrganizationUUID: in.OrganizationUUID, MaxSettlements: in.MaxSettlements, Settlements: []Settlement{}}
	stats := Stats{Kept: map[string]int{}, Refused: map[string]int{}}
	var p *explain.Preview // a dry run's
	if run.DryRun {
		p = explain.NewPreview(explain.ReadOnlyTransaction)
		stats.Preview = p
	}
	fail := func(step string, err error) (Output, Stats, error) {
		return out, stats, agesweep.StoreError(step, err)
	}
	now, err := w.Now(ctx)
	if err != nil {
		return out, stats, err
	}
	group, err := w.Store.GetGroup(ctx, in.RunnerGroupUUID)
	if err != nil {
		return fail("group", err)
	}
	out.HeartbeatTimeoutSeconds = group.HeartbeatTimeoutSeconds
	timeout := time.Duration(group.HeartbeatTimeoutSeconds) * time.Second
	stale := func(l ledger.WorkspaceLease) bool { return now.Sub(l.HeartbeatAt) > timeout }

	var candidates []ledger.WorkspaceLease
	var reasons []string           // each candidate's reason
	var ageAlone, staleOther int64 // examined leases with a stale heartbeat: abandoned on age alone, or judged otherwise
	var malformed workflow.Malformed
	unread := false // the scan stopped with stale heartbeats still behind it
	var holdersErr error
	page := func(ctx context.Context, after *ledger.Cursor, want int) ([]ledger.WorkspaceLease, error) {
		return w.Store.ScanActive(ctx, in.OrganizationUUID, in.RunnerGroupUUID, after, want)
	}
	cursor := func(last ledger.WorkspaceLease) *ledger.Cursor {
		return &ledger.Cursor{At: last.HeartbeatAt, ID: last.UUID}
	}
	want := func() int { return min(w.Config.PageSize, w.Config.MaxExamined-out.Examined) }
	complete, err := agesweep.Pages(ctx, page, cursor, want, func(page []ledger.WorkspaceLease, full bool) bool {
		holders := make([]string, 0, len(page))
		for _, l := range page {
			if l.Malformed == "" {
				holders = append(holders, l.HolderUUID)
			}
		}
		instances, err := w.Store.Instances(ctx, holders)
		if err != nil {
			holdersErr = err
			return false
		}
		for _, l := range page {
			out.Examined++
			if l.Malformed != "" {
				malformed.Note(log, ledger.WorkspaceLeasesCollection+"/"+l.UUID, l.Malformed)
				if p != nil {
					p.Add(l.UUID, "skip", "malformed", l.Malformed)
				}
				continue
			}
			inst, found := instances[l.HolderUUID]
			abandon, why := Decide(l, ledger.ResolveHolder(l, inst, found), now, timeout)
			switch {
			case abandon && why == ReasonHolderUnresolvableStale:
				ageAlone++
			case stale(l):
				staleOther++
			}
			switch {
			case !abandon:
				stats.Kept[why]++
				if p != nil {
					p.Add(l.UUID, "keep", why, "")
				}
			case len(candidates) < in.MaxSettlements:
				candidates, reasons = append(candidates, l), append(reasons, why)
			default:
				stats.OverBudget++
				if p != nil {
					p.Add(l.UUID, "defer", "max_settlements", "abandonable ("+why+"), left for the next run")
				}
			}
		}
		if !full {
			return false // read them all
		}
		last := page[len(page)-1]
		if len(candidates) >= in.MaxSettlements && !stale(last) {
			return false // nothing behind can be taken this run or counts toward the guard
		}
		if out.Examined >= w.Config.MaxExamined {
			stats.ScanCapped = true
			unread = stale(last)
			log.Warn("lease scan stopped at its cap; the rest of the group waits for the next run", "examined", out.Examined)
		}
		return true
	})
	switch {
	case holdersErr != nil:
		return fail("holders", holdersErr)
	case err != nil && ctx.Err() != nil:
		stats.OutOfBudget = true
	case err != nil:
		return fail("scan", err)
	}
	stats.Malformed = malformed.Report()

	if stats.OutOfBudget {
		out.Outcome, out.Reason = OutcomeNothingToSettle, "the run's budget ran out while it read the group's leases; nothing was written"
		return out, stats, nil
	}
	inv, err := w.Store.Invisible(ctx, in.OrganizationUUID, in.RunnerGroupUUID)
	stats.Invisible = workflow.ReportInvisible(log, ledger.WorkspaceLeasesCollection, "heartbeat_at", inv, err)
	verdict, err := w.judge(ctx, in, now, timeout, ageAlone, staleOther, unread, complete, out.Examined)
	if err != nil {
		return fail("count", err)
	}
	verdict = verdict.Override(run.Overrides.Storm)
	stats.StormGuard = &verdict
	if verdict.Holds() {
		// Leases whose holder is terminal are not age alone: they are still abandoned.
		var kept []ledger.WorkspaceLease
		for i, l := range candidates {
			switch {
			case reasons[i] != ReasonHolderUnresolvableStale:
				kept = append(kept, l)
			case p != nil:
				p.Add(l.UUID, "keep", storm.Reason, "abandonable ("+reasons[i]+"), but the storm guard holds back abandonments on age alone")
			}
		}
		stats.Kept[storm.Reason] += len(candidates) - len(kept)
		candidates = kept
		guard.Held(log, verdict, "storm guard: leases with unresolvable holders and stale heartbeats are too large a share of the group's active leases; abandoned none of them")
	} else if verdict.Overridden {
		guard.Overridden(log, verdict)
	}
	if p != nil {
		p.StormGuardWouldStop = verdict.Holds()
	}
	w.settle(ctx, run, in, candidates, now, timeout, &out, &stats, log)

	switch {
	case p != nil:
		// A dry run settles nothing (settled 0); its outcome and reason say what the run would do.
		out.Outcome = OutcomeNothingToSettle
		if p.Counts["abandon"] > 0 {
			out.Outcome = OutcomeWouldSettle
		}
		out.Reason = fmt.Sprintf("dry run: would abandon %d of %d active leases examined (at most %d per run); nothing was written",
			p.Counts["abandon"], out.Examined, in.MaxSettlements)
	case out.Settled > 0:
		out.Outcome = OutcomeSettled
	default:
		out.Outcome = OutcomeNothingToSettle
	}
	if p == nil {
		out.Reason = fmt.Sprintf("abandoned %d of %d active leases examined (at most %d per run)", out.Settled, out.Examined, in.MaxSettlements)
	}
	if verdict.Holds() {
		return out, stats, verdict.StepError()
	}
	return out, stats, nil
}

var guard = agesweep.Guard{Aged: "aged", Live: "active", Settling: "abandoning"}

// judge is the storm guard's verdict. Stale leases left unread (the scan's cap) count as age
// alone: the guard errs on the side of holding back.
func (w *Workflow) judge(ctx context.Context, in Input, now time.Time, timeout time.Duration, ageAlone, staleOther int64, unread, complete bool, examined int) (storm.Verdict, error) {
	aged := ageAlone
	if unread {
		total, err := w.Store.CountActive(ctx, in.OrganizationUUID, in.RunnerGroupUUID, now.Add(-timeout))
		if err != nil {
			return storm.Verdict{}, err
		}
		aged = max(aged, total-staleOther)
	}
	if complete {
		return w.Config.Storm.Judge(aged, int64(examined)), nil
	}
	live, err := w.Store.CountActive(ctx, in.OrganizationUUID, in.RunnerGroupUUID, time.Time{})
	if err != nil {
		return storm.Verdict{}, err
	}
	return w.Config.Storm.Judge(aged, live), nil
}

// settle abandons each candidate in its own transaction, which checks Refuse and the pause and
// decides again on a fresh read. The first lease a pause refuses stops the rest.
func (w *Workflow) settle(ctx context.Context, run workflow.Run, in Input, candidates []ledger.WorkspaceLease, now time.Time, timeout time.Duration, out *Output, stats *Stats, log *slog.Logger) {
	type result struct {
		s       Settlement
		settled bool
		refused string
	}
	var reads ledger.Reads
	if !run.Overrides.OptOut {
		reads.Organization = in.OrganizationUUID
	}
	if !run.Overrides.Pause {
		// The fleet's pause, the organization's and the group's.
		reads.Pauses = pausestore.PauseIDs(string(Declared.Type), workflow.ScopeValues{in.OrganizationUUID, in.RunnerGroupUUID}.Key())
	}
	abandon := w.Store.AbandonLease
	if run.DryRun {
		abandon = w.Store.PreviewAbandonLease
	}
	results, errs, _ := agesweep.Settle(ctx, candidates, w.Config.Concurrency, func(ctx context.Context, seen ledger.WorkspaceLease) (result, error) {
		var s Settlement
		settled, refused, err := abandon(ctx, seen.UUID, reads, func(l ledger.WorkspaceLease, holder ledger.HolderView, facts ledger.Facts) (*ledger.Settlement, string) {
			if why := Refuse(l, in, facts, run.Overrides.OptOut); why != "" {
				return nil, why
			}
			if l.HolderUUID != seen.HolderUUID || !l.HeartbeatAt.Equal(seen.HeartbeatAt) {
				return nil, ""
			}
			abandon, why := Decide(l, holder, now, timeout)
			if !abandon {
				return nil, ""
			}
			age := int64(now.Sub(l.HeartbeatAt) / time.Second)
			s = Settlement{LeaseUUID: l.UUID, WorkspaceID: l.WorkspaceID, HolderUUID: l.HolderUUID, HolderStatus: holder.Status, Reason: why, HeartbeatAgeSeconds: age}
			return &ledger.Settlement{At: now, WorkflowRunUUID: run.UUID, Reason: why, Evidence: map[string]any{
				"holder_runner_instance_uuid": l.HolderUUID, "holder_resolved": holder.Resolved, "holder_status": holder.Status,
				"heartbeat_at": l.HeartbeatAt, "heartbeat_age_seconds": age, "heartbeat_timeout_seconds": int64(timeout / time.Second),
			}}, ""
		})
		return result{s: s, settled: settled, refused: refused}, err
	}, func(r result) (result, bool) { return result{refused: RefusePaused}, r.refused == RefusePaused })
	for i, r := range results {
		err := errs[i]
		l := log.With("lease_uuid", candidates[i].UUID, "workspace_id", candidates[i].WorkspaceID)
		if stats.Preview != nil {
			previewSettle(stats.Preview, candidates[i].UUID, r.s, r.settled, r.refused, err, ctx.Err() != nil)
			if r.settled {
				continue // a dry run settles nothing: its output says so
			}
			l = slog.New(slog.DiscardHandler)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			stats.OutOfBudget = true
		case err != nil:
			stats.Errored++
			l.Warn("abandoning a lease failed; nothing written", "error", err.Error())
		case r.refused == RefuseDisabled:
			stats.Refused[r.refused]++
			l.Warn("the organization opted out of sweeps during the run; lease left as it is")
		case r.refused == RefusePaused:
			stats.Refused[r.refused]++
		case r.refused != "":
			stats.Refused[r.refused]++
			l.Error("the lease is not this run's to write; left as it is", "refused", r.refused)
		case r.settled:
			out.Settled++
			out.Settlements = append(out.Settlements, r.s)
			l.Info("workspace lease abandoned", alerts.RowSettled.Attr(), "path", alerts.PathSweep, "outcome", ledger.OutcomeAbandoned, "reason", r.s.Reason, "holder_runner_instance_uuid", r.s.HolderUUID, "heartbeat_age_seconds", r.s.HeartbeatAgeSeconds)
		default:
			stats.Raced++
		}
	}
	if n := stats.Refused[RefusePaused]; n > 0 && stats.Preview == nil {
		log.Warn("the workflow was paused on the runner group while the run settled it: the leases left were not abandoned", "left", n)
	}
}

func previewSettle(p *explain.Preview, id string, s Settlement, settled bool, refused string, err error, outOfBudget bool) {
	if agesweep.PreviewFailed(p, id, err, outOfBudget) {
		return
	}
	switch {
	case refused == RefusePaused:
		p.Add(id, "refuse", refused, "the workflow is paused on the runner group: nothing would be abandoned until it is resumed")
	case refused != "":
		p.Add(id, "refuse", refused, "the lease is not this run's to write")
	case settled:
		p.Add(id, "abandon", s.Reason, fmt.Sprintf("holder %s (status %q), heartbeat %ds old", s.HolderUUID, s.HolderStatus, s.HeartbeatAgeSeconds))
	default:
		p.Add(id, "keep", "moved", "its holder or heartbeat changed since the scan")
	}
}
