package leasesettle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/workflow"
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

// Decide is the whole rule for one lease, given its holder as read and the group's timeout. It
// returns whether to abandon and why.
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
	ScanActive(ctx context.Context, org, group string, after *ledger.LeaseCursor, limit int) ([]ledger.WorkspaceLease, error)
	Instances(ctx context.Context, ids []string) (map[string]ledger.RunnerInstance, error)
	AbandonLease(ctx context.Context, leaseID string, decide func(ledger.WorkspaceLease, ledger.HolderView) *ledger.Settlement) (bool, error)
}

// Workflow is runner.workspace-lease-settle.
type Workflow struct {
	store Store
	cfg   Config
	clock ledger.Clock // Firestore's clock in production (ledger.ServerClock)
}

// New returns the workflow.
func New(store Store, cfg Config, clock ledger.Clock) *Workflow {
	return &Workflow{store: store, cfg: cfg.WithDefaults(), clock: clock}
}

// Definition returns the workflow as the engine runs it: atomic, as seed 004 says.
func (w *Workflow) Definition() workflow.Definition {
	return workflow.Definition{
		Type: contract.WorkspaceLeaseSettle, States: workflow.Atomic, Envelope: EnvelopeLeaseSettle,
		Check: w.check, Body: w.body,
	}
}

// check refuses a group that does not exist, belongs to another organization, or has no
// usable heartbeat timeout, before anything is written.
func (w *Workflow) check(ctx context.Context, input json.RawMessage, _ workflow.Trigger) error {
	var in Input
	if err := json.Unmarshal(input, &in); err != nil {
		return contract.Invalid("initial_data", "type", "%v", err)
	}
	g, err := w.store.GetGroup(ctx, in.RunnerGroupUUID)
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

func (w *Workflow) body(ctx context.Context, run workflow.Run) (workflow.Result, error) {
	var in Input
	if err := json.Unmarshal(run.Input, &in); err != nil {
		return workflow.Result{}, &workflow.StepError{Step: "decode", Layer: "workflow", Reason: "input_invalid", Err: err}
	}
	out, stats, err := w.RunOnce(ctx, run.UUID, in, run.Logger)
	return workflow.Result{Output: out, Stats: stats}, err
}

// RunOnce is one run over one group.
func (w *Workflow) RunOnce(ctx context.Context, runUUID string, in Input, log *slog.Logger) (Output, Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Budget)
	defer cancel()
	log = log.With("organization_uuid", in.OrganizationUUID, "runner_group_uuid", in.RunnerGroupUUID)
	out := Output{RunnerGroupUUID: in.RunnerGroupUUID, OrganizationUUID: in.OrganizationUUID, MaxSettlements: in.MaxSettlements, Settlements: []Settlement{}}
	stats := Stats{Kept: map[string]int{}}
	fail := func(step string, err error) (Output, Stats, error) {
		return out, stats, &workflow.StepError{Step: step, Layer: "firestore", Reason: step + "_failed", Err: err}
	}
	now, err := w.clock(ctx)
	if err != nil {
		return fail("clock", err)
	}
	group, err := w.store.GetGroup(ctx, in.RunnerGroupUUID)
	if err != nil {
		return fail("group", err)
	}
	out.HeartbeatTimeoutSeconds = group.HeartbeatTimeoutSeconds
	timeout := time.Duration(group.HeartbeatTimeoutSeconds) * time.Second

	// Page until max_settlements leases are abandoned, the leases run out, or MaxExamined.
	var after *ledger.LeaseCursor
	for out.Settled < in.MaxSettlements && out.Examined < w.cfg.MaxExamined {
		page, err := w.store.ScanActive(ctx, in.OrganizationUUID, in.RunnerGroupUUID, after, min(w.cfg.PageSize, w.cfg.MaxExamined-out.Examined))
		if err != nil {
			if ctx.Err() != nil {
				stats.OutOfBudget = true
				break
			}
			return fail("scan", err)
		}
		holders := make([]string, len(page))
		for i, l := range page {
			holders[i] = l.HolderUUID
		}
		instances, err := w.store.Instances(ctx, holders)
		if err != nil {
			return fail("holders", err)
		}
		var candidates []ledger.WorkspaceLease
		for _, l := range page {
			out.Examined++
			inst, found := instances[l.HolderUUID]
			abandon, why := Decide(l, ledger.ResolveHolder(l, inst, found), now, timeout)
			switch {
			case !abandon:
				stats.Kept[why]++
			case out.Settled+len(candidates) < in.MaxSettlements:
				candidates = append(candidates, l)
			default:
				stats.OverBudget++
			}
		}
		w.settle(ctx, runUUID, candidates, now, timeout, &out, &stats, log)
		if len(page) < w.cfg.PageSize {
			break
		}
		last := page[len(page)-1]
		after = &ledger.LeaseCursor{HeartbeatAt: last.HeartbeatAt, UUID: last.UUID}
		if out.Examined >= w.cfg.MaxExamined {
			stats.ScanCapped = true
			log.Warn("lease scan stopped at its cap; the rest of the group waits for the next run", "examined", out.Examined)
		}
	}
	if out.Settled > 0 {
		out.Outcome = "settled"
	} else {
		out.Outcome = "nothing_to_settle"
	}
	out.Reason = fmt.Sprintf("abandoned %d of %d active leases examined (at most %d per run)", out.Settled, out.Examined, in.MaxSettlements)
	return out, stats, nil
}

// settle abandons each candidate in its own transaction, which decides again on a fresh read of
// the lease and its holder and leaves alone a lease whose holder or heartbeat moved.
func (w *Workflow) settle(ctx context.Context, runUUID string, candidates []ledger.WorkspaceLease, now time.Time, timeout time.Duration, out *Output, stats *Stats, log *slog.Logger) {
	type result struct {
		s       Settlement
		settled bool
		err     error
	}
	results := make([]result, len(candidates))
	parallel.ForEach(ctx, len(candidates), w.cfg.Concurrency, func(i int) bool {
		seen := candidates[i]
		var s Settlement
		settled, err := w.store.AbandonLease(ctx, seen.UUID, func(l ledger.WorkspaceLease, holder ledger.HolderView) *ledger.Settlement {
			if l.HolderUUID != seen.HolderUUID || !l.HeartbeatAt.Equal(seen.HeartbeatAt) {
				return nil
			}
			abandon, why := Decide(l, holder, now, timeout)
			if !abandon {
				return nil
			}
			age := int64(now.Sub(l.HeartbeatAt) / time.Second)
			s = Settlement{LeaseUUID: l.UUID, WorkspaceID: l.WorkspaceID, HolderUUID: l.HolderUUID, HolderStatus: holder.Status, Reason: why, HeartbeatAgeSeconds: age}
			return &ledger.Settlement{At: now, WorkflowRunUUID: runUUID, Reason: why, Evidence: map[string]any{
				"holder_runner_instance_uuid": l.HolderUUID, "holder_resolved": holder.Resolved, "holder_status": holder.Status,
				"heartbeat_at": l.HeartbeatAt, "heartbeat_age_seconds": age, "heartbeat_timeout_seconds": int64(timeout / time.Second),
			}}
		})
		results[i] = result{s: s, settled: settled, err: err}
		return err != nil && ctx.Err() == nil
	})
	for i, r := range results {
		l := log.With("lease_uuid", candidates[i].UUID, "workspace_id", candidates[i].WorkspaceID)
		switch {
		case r.err != nil && ctx.Err() != nil:
			stats.OutOfBudget = true
		case r.err != nil:
			stats.Errored++
			l.Warn("abandoning a lease failed; nothing written", "error", r.err.Error())
		case r.settled:
			out.Settled++
			out.Settlements = append(out.Settlements, r.s)
			l.Info("workspace lease abandoned", "reason", r.s.Reason, "holder_runner_instance_uuid", r.s.HolderUUID, "heartbeat_age_seconds", r.s.HeartbeatAgeSeconds)
		default:
			stats.Raced++
		}
	}
}
