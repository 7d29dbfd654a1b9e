package executionsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// EnvelopeCloudRun lists the record fields seed 003's output echoes.
var EnvelopeCloudRun = []string{
	"completed_at", "failed_at", "failure_reason", "failure_type", "failed_action",
	"failed_at_state", "failed_step", "failed_layer", "error", "error_type",
}

// EnvelopeKubernetes lists the record fields seed 002's output echoes (it has no failure_type
// or failed_action).
var EnvelopeKubernetes = []string{
	"completed_at", "failed_at", "failure_reason", "failed_at_state", "failed_step", "failed_layer", "error", "error_type",
}

// Kind is one executor's execution-sync workflow, declared.
type Kind struct {
	workflow.Declaration
	Provider string
	Envelope []string
}

// The two execution-sync workflows: per organization, startable by a request, settling only on
// the executor's word (no storm guard: the blind-executor guard holds lost settlements).
var (
	CloudRun = Kind{
		Declaration: workflow.Declaration{Type: contract.ExecutionSyncCloudRun, Scope: workflow.ScopeOrganization, FromRequest: true},
		Provider:    ledger.ProviderCloudRun, Envelope: EnvelopeCloudRun,
	}
	Kubernetes = Kind{
		Declaration: workflow.Declaration{Type: contract.ExecutionSyncKubernetes, Scope: workflow.ScopeOrganization, FromRequest: true},
		Provider:    ledger.ProviderKubernetes, Envelope: EnvelopeKubernetes,
	}
)

// Workflow is one execution-sync workflow: one provider, one executor.
type Workflow struct {
	store   Store
	exec    executor.Executor
	starter Starter
	cfg     Config
	now     func() time.Time
	syncer  *Syncer // decides a dry run's rows and explain's (New's preview)
}

// New returns the workflow, cfg completed with its defaults and validated. preview is the syncer
// a dry run and explain decide rows with, since a dry run never publishes; nil takes an Inline
// starter's syncer.
func New(store Store, exec executor.Executor, starter Starter, cfg Config, now func() time.Time, preview *Syncer) (*Workflow, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workflow{store: store, exec: exec, starter: starter, cfg: cfg, now: now, syncer: preview}
	if in, ok := starter.(*Inline); ok && preview == nil {
		w.syncer = in.Syncer
	}
	return w, nil
}

// Definition returns the workflow as the engine runs it, as kind k.
func (w *Workflow) Definition(k Kind) workflow.Definition {
	return workflow.Definition{Declaration: k.Declaration, States: workflow.Linear, Envelope: k.Envelope, Probe: w.probe, ProbeBatch: firestoreconn.InMax, Body: w.body}
}

// probe: an organization has work when one of its active rows of this provider was observed
// min_age_seconds ago or earlier, asked for up to firestoreconn.InMax organizations per query. A row
// without a provider reference counts (the run reports it); an invisible row does not, so only
// the runs of organizations that have work report it.
func (w *Workflow) probe(ctx context.Context, inputs []json.RawMessage, now time.Time) ([]bool, error) {
	// The inputs of one tick share their min_age_seconds; any that differ are asked apart.
	ins := make([]Input, len(inputs))
	byAge := map[int64][]string{}
	for i, raw := range inputs {
		if err := json.Unmarshal(raw, &ins[i]); err != nil {
			return nil, err
		}
		byAge[ins[i].MinAgeSeconds] = append(byAge[ins[i].MinAgeSeconds], ins[i].OrganizationUUID)
	}
	out := make([]bool, len(inputs))
	for age, batch := range byAge {
		found, err := w.store.StaleOrganizations(ctx, batch, w.cfg.Provider, now.Add(-time.Duration(age)*time.Second))
		if err != nil {
			return nil, err
		}
		for i, in := range ins {
			out[i] = out[i] || (in.MinAgeSeconds == age && slices.Contains(found, in.OrganizationUUID))
		}
	}
	return out, nil
}

func (w *Workflow) body(ctx context.Context, run workflow.Run) (workflow.Result, error) {
	var in Input
	if err := json.Unmarshal(run.Input, &in); err != nil {
		return workflow.Result{}, &workflow.StepError{Step: "decode", Layer: "workflow", Reason: "input_invalid", Err: err}
	}
	out, stats, err := w.RunOnce(ctx, run, in)
	return workflow.Result{Output: out, Stats: stats}, err
}

// RunOnce is one run: scan, start the syncs, count; of run it uses the uuid, logger and overrides.
func (w *Workflow) RunOnce(ctx context.Context, run workflow.Run, in Input) (Output, Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Budget)
	defer cancel()
	log := run.Logger.With("organization_uuid", in.OrganizationUUID)
	horizon := w.now().Add(-time.Duration(in.MinAgeSeconds) * time.Second)
	out := Output{
		OrganizationUUID:            in.OrganizationUUID,
		Limit:                       in.Limit,
		MinAgeSeconds:               in.MinAgeSeconds,
		StartedRunnerExecutionUUIDs: []string{},
		FailedRunnerExecutionUUIDs:  []string{},
	}
	stats := Stats{Settled: map[string]int{}}

	// The count of rows no scan can see runs beside the scan and the syncs: it reads one
	// snapshot of the scope (ledger's invisible), which the syncs' writes do not move.
	type counted struct {
		inv ledger.Invisible
		err error
	}
	invisible := make(chan counted, 1)
	go func() {
		inv, err := w.store.Invisible(ctx, in.OrganizationUUID, w.cfg.Provider)
		invisible <- counted{inv, err}
	}()
	reqs, err := w.scan(ctx, run.UUID, in, horizon, &out, &stats, log)
	for i := range reqs {
		reqs[i].IncludeDisabled = run.Overrides.OptOut
		reqs[i].OverridePause = run.Overrides.Pause
	}
	if err != nil {
		<-invisible
		return out, stats, &workflow.StepError{Step: "scan", Layer: "firestore", Reason: "scan_failed", Err: err}
	}
	if out.SkippedMissingMetadataCount > 0 {
		log.Warn("active runner executions without a provider reference; they stay active until a writer fixes them",
			"skipped_missing_metadata_count", out.SkippedMissingMetadataCount,
			"runner_execution_uuids", stats.Skipped)
	}

	starter := w.starter
	if run.DryRun {
		if w.syncer == nil {
			return out, stats, &workflow.StepError{Step: "preview", Layer: "workflow", Reason: "dry_run_unavailable",
				Err: errors.New("this workflow was built without a syncer to preview with")}
		}
		starter = &dryStarter{syncer: w.syncer, concurrency: w.cfg.Concurrency, dry: newDryRun()}
	}
	results := starter.Start(ctx, reqs)
	var stopErr error
	reach := reachOf(results)
	for _, r := range results {
		if r.Started() {
			out.StartedCount++
			out.StartedRunnerExecutionUUIDs = append(out.StartedRunnerExecutionUUIDs, r.RunnerExecutionUUID)
		} else {
			out.FailedStartCount++
			out.FailedRunnerExecutionUUIDs = append(out.FailedRunnerExecutionUUIDs, r.RunnerExecutionUUID)
		}
		switch r.Outcome {
		case SyncSettled:
			stats.Settled[r.Settled]++
		case SyncRefreshed:
			stats.Refreshed++
		case SyncUnknown:
			stats.Unknown++
			if r.Why == WhyBlindExecutor {
				if stats.Blind == nil {
					stats.Blind = map[string]int{}
				}
				stats.Blind[r.Target]++
			}
		case SyncRaced:
			stats.Raced++
		case SyncRefused:
			if stats.Refused == nil {
				stats.Refused = map[string]int{}
			}
			stats.Refused[r.Why]++
		case SyncPublished:
			stats.Published++
		case SyncDeferred:
			stats.Deferred++
			if r.Why == "budget_spent" {
				stats.OutOfBudget = true
			}
		case SyncErrored:
			stats.Errored++
			if len(stats.Errors) < w.cfg.MaxErrors {
				stats.Errors = append(stats.Errors, RowError{
					RunnerExecutionUUID: r.RunnerExecutionUUID, Layer: r.Layer, Code: status.Code(r.Err).String(), Error: r.Err.Error(),
				})
			}
			if why, ok := stopsCalls(r.Err); ok && r.Layer == LayerExecutor && stats.StoppedBy == "" {
				stats.StoppedBy = why
				if why != "resource_exhausted" {
					stopErr = r.Err
				}
			}
		}
	}
	for target, held := range stats.Blind {
		log.Error("blind executor: rows of this target past the lost grace were not settled lost; an operator clears the target after checking (stalesweep executors clear)",
			"target", target, "held", held)
	}
	if stats.StoppedBy != "" {
		log.Warn("executor calls stopped for the rest of the run", "stopped_by", stats.StoppedBy, "deferred", stats.Deferred)
	}
	c := <-invisible
	stats.Invisible = workflow.ReportInvisible(log, ledger.ExecutionsCollection, "observed_at", c.inv, c.err)
	if run.DryRun {
		// Nothing was settled, refreshed or held: the preview says what would have been.
		stats.Preview = preview(results, stats.Skipped, out.SkippedMissingMetadataCount)
		stats.Settled, stats.Refreshed, stats.Unknown, stats.Blind, stats.Raced, stats.Refused = map[string]int{}, 0, 0, nil, 0, nil
	}
	if stopErr != nil {
		return out, stats, &workflow.StepError{Step: "sync", Layer: "executor", Reason: "executor_" + stats.StoppedBy, Err: stopErr}
	}
	if reach.unreachable() {
		log.Error("the executor answered no call of the run: every call failed as an unreachable executor's do; nothing was learned",
			"errored", reach.absent, "error", reach.first.Error())
		return out, stats, &workflow.StepError{Step: "sync", Layer: "executor", Reason: ReasonExecutorUnreachable, Err: reach.first}
	}
	return out, stats, nil
}

// ReasonExecutorUnreachable is the failure_reason of a run that asked the executor about rows
// and heard about none: every call failed with Unavailable or DeadlineExceeded.
const ReasonExecutorUnreachable = "executor_unreachable"

// reach counts a run's executor calls: answered, failed as an unreachable executor fails
// (absent, with the first such error), and failed otherwise.
type reach struct {
	answered, absent, other int
	first                   error
}

func reachOf(results []SyncResult) reach {
	var r reach
	for _, res := range results {
		switch {
		case res.Answered:
			r.answered++
		case res.Outcome == SyncErrored && res.Layer == LayerExecutor:
			switch status.Code(res.Err) {
			case codes.Unavailable, codes.DeadlineExceeded:
				r.absent++
				if r.first == nil {
					r.first = res.Err
				}
			default:
				r.other++
			}
		}
	}
	return r
}

// unreachable: the run asked the executor about at least one row, none was answered, and every
// failure was an unreachable executor's; a run that asked nothing here (all published or
// deferred) is not judged.
func (r reach) unreachable() bool { return r.answered == 0 && r.other == 0 && r.absent > 0 }

// scan reads stale rows page by page until it has in.Limit rows to sync, runs out of rows, or
// has read ScanFactor × limit documents; every row it reads is a candidate.
func (w *Workflow) scan(ctx context.Context, runUUID string, in Input, horizon time.Time, out *Output, stats *Stats, log *slog.Logger) ([]message.Sync, error) {
	var malformed workflow.Malformed
	defer func() { stats.Malformed = malformed.Report() }()
	maxDocs := in.Limit * w.cfg.ScanFactor
	var reqs []message.Sync
	var after *ledger.Cursor
	for len(reqs) < in.Limit && stats.Scanned < maxDocs {
		want := min(in.Limit-len(reqs), maxDocs-stats.Scanned)
		rows, cur, err := w.store.Scan(ctx, ledger.ScanQuery{
			OrganizationUUID: in.OrganizationUUID,
			Provider:         w.cfg.Provider,
			Horizon:          horizon,
			PageSize:         want,
			After:            after,
		})
		if err != nil {
			return nil, err
		}
		stats.Scanned += len(rows)
		out.CandidateCount += len(rows)
		for _, row := range rows {
			if row.Malformed != "" || !w.exec.ValidRef(row.ProviderRef) {
				out.SkippedMissingMetadataCount++
				if row.Malformed != "" {
					malformed.Note(log, ledger.ExecutionsCollection+"/"+row.UUID, row.Malformed)
				}
				if len(stats.Skipped) < w.cfg.MaxErrors {
					stats.Skipped = append(stats.Skipped, row.UUID)
				}
				continue
			}
			reqs = append(reqs, message.Sync{
				WorkflowRunUUID:     runUUID,
				OrganizationUUID:    in.OrganizationUUID,
				RunnerExecutionUUID: row.UUID,
				Provider:            w.cfg.Provider,
				ProviderRef:         row.ProviderRef,
				ObservedAt:          row.ObservedAt,
			})
		}
		if len(rows) < want {
			return reqs, nil // no more stale rows
		}
		if cur == nil {
			return nil, errors.New("scan page without a cursor")
		}
		after = cur
	}
	stats.ScanCapped = len(reqs) < in.Limit
	return reqs, nil
}

// String renders stats for a human.
func (s Stats) String() string {
	return fmt.Sprintf("settled=%v refreshed=%d unknown=%d raced=%d errored=%d deferred=%d",
		s.Settled, s.Refreshed, s.Unknown, s.Raced, s.Errored, s.Deferred)
}
