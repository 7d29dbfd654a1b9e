package runssweep

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// Store is what the sweep needs of the ledger; *ledger.ExtensionRunStore has it.
type Store interface {
	ScanIdle(ctx context.Context, deadline time.Time, after *ledger.Cursor, limit int) ([]ledger.ExtensionRun, error)
	CountRunning(ctx context.Context, deadline time.Time) (int64, error)
	// Abandon reads the pause documents pauses names with the run, and leaves it
	// (ledger.LeftPaused) when one holds.
	Abandon(ctx context.Context, runID string, pauses []string, s ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error)
	PreviewAbandon(ctx context.Context, runID string, pauses []string, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error)
	Invisible(ctx context.Context) (ledger.Invisible, error)
}

// ReasonIdle is the settlement reason of an abandoned invocation.
const ReasonIdle = "idle_past_deadline"

const (
	LeftNotRunning ledger.Left = "not_running" // it finished (or was abandoned) since the scan
	LeftMoved      ledger.Left = "moved"       // it moved since the scan
	LeftNotIdle    ledger.Left = "not_idle"    // it is no longer idle past the deadline
)

// Workflow is the sweep.
type Workflow struct{ agesweep.Sweep[Store, Config] }

// New returns the sweep.
func New(store Store, cfg Config, clock firestoreconn.Clock) *Workflow {
	return &Workflow{agesweep.New(store, cfg, clock)}
}

// Declared is the sweep's declaration; a request may not start it, since its deadline is the
// caller's, unclamped, and on the wire it would be a fleet-wide kill switch (seed 000).
var Declared = workflow.Declaration{Type: contract.ExtensionRunsSweep, Scope: workflow.ScopeFleet, FromRequest: false, AgeBased: true}

// Definition returns the sweep as the engine runs it: atomic, since seed 000 defines no states.
func (w *Workflow) Definition() workflow.Definition {
	return floor.Definition(Declared, w.Config.ScheduledFloorMs, w.probe, agesweep.Body(func(ctx context.Context, run workflow.Run, in Input) (Output, Stats, error) {
		return w.runOnce(ctx, run.UUID, in, run.Overrides.Storm, run.DryRun, Pauses(run.Overrides.Pause), run.Logger)
	}))
}

var floor = agesweep.Floor{Field: "older_than_ms", Setting: "STALESWEEP_EXTENSION_SWEEP_FLOOR_MS",
	Why: "a small deadline on a scheduled path would abandon live runs fleet-wide"}

// probe: the fleet has work when one running app invocation is idle past the deadline.
func (w *Workflow) probe(ctx context.Context, input json.RawMessage, now time.Time) (bool, error) {
	var in Input
	if err := json.Unmarshal(input, &in); err != nil {
		return false, err
	}
	idle, err := w.Store.ScanIdle(ctx, Deadline(now, in.OlderThanMs), nil, 1)
	return len(idle) > 0, err
}

// Pauses are the pause documents each abandonment reads with its run.
func Pauses(overridePause bool) []string {
	if overridePause {
		return nil
	}
	return pausestore.PauseIDs(string(Declared.Type), workflow.ScopeFleet.Key(nil))
}

// Abandonable is the rule an abandonment's transaction applies to the run as it re-reads it,
// seen being the run as the scan read it.
func Abandonable(seen ledger.ExtensionRun, deadline time.Time) func(ledger.ExtensionRun) ledger.Left {
	return func(r ledger.ExtensionRun) ledger.Left {
		switch {
		case r.Status != ledger.ExtensionRunning:
			return LeftNotRunning
		case !r.LastMovedAt.Equal(seen.LastMovedAt):
			return LeftMoved
		case !r.LastMovedAt.Before(deadline):
			return LeftNotIdle
		}
		return ""
	}
}

var guard = agesweep.Guard{Aged: "idle", Live: "running", Settling: "abandoning"}

// firestoreMin is the earliest time Firestore stores.
var firestoreMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// Deadline is now − olderThanMs, in milliseconds so that any int53 is exact, and no earlier than
// the earliest time Firestore stores.
func Deadline(now time.Time, olderThanMs int64) time.Time {
	ms := now.UnixMilli() - olderThanMs
	if ms < firestoreMin.UnixMilli() {
		return firestoreMin
	}
	return time.UnixMilli(ms).UTC()
}

// RunOnce is one sweep. override lets it go ahead where the storm guard would stop it; a pause
// is never overridden.
func (w *Workflow) RunOnce(ctx context.Context, runUUID string, in Input, override bool, log *slog.Logger) (Output, Stats, error) {
	return w.runOnce(ctx, runUUID, in, override, false, Pauses(false), log)
}

// runOnce is one sweep, or its dry run. The first abandonment a pause refuses stops the rest.
func (w *Workflow) runOnce(ctx context.Context, runUUID string, in Input, override, dry bool, pauses []string, log *slog.Logger) (Output, Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Config.Budget)
	defer cancel()
	out := Output{OlderThanMs: in.OlderThanMs, Runs: []SweptRun{}}
	stats := Stats{}
	now, err := w.Now(ctx)
	if err != nil {
		return out, stats, err
	}
	deadline := Deadline(now, in.OlderThanMs)
	stats.Deadline = deadline.Format(time.RFC3339Nano)

	idle, capped, err := w.scan(ctx, deadline, in.Limit, &stats, log)
	if err != nil {
		return out, stats, agesweep.StoreError("scan", err)
	}
	inv, err := w.Store.Invisible(ctx)
	stats.Invisible = workflow.ReportInvisible(log, ledger.ExtensionRunsCollection, "last_moved_at", inv, err)

	// Every idle run counts, not only this run's limit: a storm abandoned limit at a time is
	// still a storm.
	aged := int64(len(idle))
	if len(idle) == in.Limit || capped {
		if aged, err = w.Store.CountRunning(ctx, deadline); err != nil {
			return out, stats, agesweep.StoreError("count", err)
		}
		aged = max(aged, int64(len(idle))) // a run read idle may have moved since
	}
	live, err := w.Store.CountRunning(ctx, time.Time{})
	if err != nil {
		return out, stats, agesweep.StoreError("count", err)
	}
	verdict := w.Config.Storm.Judge(aged, live).Override(override)
	stats.StormGuard = &verdict
	if dry {
		return out, stats, w.preview(ctx, idle, now, deadline, verdict, pauses, &stats)
	}
	switch {
	case verdict.Holds():
		guard.Held(log, verdict, "storm guard: idle app invocations are too large a share of the running ones; abandoned none", "older_than_ms", in.OlderThanMs)
		return out, stats, verdict.StepError()
	case verdict.Overridden:
		guard.Overridden(log, verdict)
	}

	results, errs, left := agesweep.Settle(ctx, idle, w.Config.Concurrency, func(ctx context.Context, r ledger.ExtensionRun) (ledger.Abandonment, error) {
		return w.Store.Abandon(ctx, r.RunID, pauses, ledger.Settlement{
			At: now, WorkflowRunUUID: runUUID, Reason: ReasonIdle,
			Evidence: map[string]any{
				"last_moved_at": r.LastMovedAt, "older_than_ms": in.OlderThanMs, "deadline": deadline,
				"idle_ms": now.Sub(r.LastMovedAt).Milliseconds(),
			},
		}, Abandonable(r, deadline))
	}, pausedLeft)

	for i, r := range idle {
		res, err := results[i], errs[i]
		l := log.With("extension_run_id", r.RunID, "tenant_id", r.TenantID, "extension_id", r.ExtensionID)
		switch {
		case err != nil && ctx.Err() != nil:
			stats.Deferred++
			stats.OutOfBudget = true
		case err != nil:
			stats.Errored++
			l.Warn("abandoning an idle run failed; nothing written", "error", err.Error())
		case res.Swept:
			out.Swept++
			out.Runs = append(out.Runs, SweptRun{
				RunID: r.RunID, ExtensionID: r.ExtensionID, TenantID: r.TenantID, JobName: r.JobName,
				Background: r.Background, IdleMs: now.Sub(r.LastMovedAt).Milliseconds(),
			})
			if res.InterlockReleased {
				stats.InterlocksReleased++
			}
			if res.InterlockHolder != "" {
				stats.InterlocksHeldByOther++
				l.Warn("abandoned a background run whose interlock is held by another run; the interlock was left alone",
					"interlock_holder_run_id", res.InterlockHolder)
			}
			l.Info("app invocation abandoned", alerts.RowSettled.Attr(), "path", alerts.PathSweep, "outcome", ledger.OutcomeAbandoned, "idle_ms", now.Sub(r.LastMovedAt).Milliseconds(), "interlock_released", res.InterlockReleased)
		case res.Why == ledger.LeftPaused:
			stats.Paused++
		case res.Why == LeftNotIdle:
			stats.NotIdle++
		default:
			stats.Moved++
		}
	}
	if left != nil {
		log.Warn("the sweep was paused while it ran: the runs left were not abandoned", "paused", left.Pause.String(), "left", stats.Paused)
	}
	if stats.Errored > 0 && stats.Errored == len(idle) {
		return out, stats, agesweep.StoreError("abandon", fmt.Errorf("every one of %d abandon transactions failed: %w", len(idle), firstErr(errs)))
	}
	return out, stats, nil
}

// preview is the rest of a dry run once the guard has judged; nothing is written.
func (w *Workflow) preview(ctx context.Context, idle []ledger.ExtensionRun, now, deadline time.Time, verdict storm.Verdict, pauses []string, stats *Stats) error {
	p := agesweep.NewPreview(verdict, stats.Malformed)
	stats.Preview = p
	results, errs, _ := agesweep.Settle(ctx, idle, w.Config.Concurrency, func(ctx context.Context, r ledger.ExtensionRun) (ledger.Abandonment, error) {
		return w.Store.PreviewAbandon(ctx, r.RunID, pauses, Abandonable(r, deadline))
	}, pausedLeft)
	for i, r := range idle {
		res, err := results[i], errs[i]
		agesweep.PreviewFailed(p, r.RunID, err, ctx.Err() != nil)
		switch {
		case err != nil && ctx.Err() != nil:
			stats.Deferred++
			stats.OutOfBudget = true
		case err != nil:
			stats.Errored++
		case res.Why == ledger.LeftPaused:
			stats.Paused++
			p.Add(r.RunID, "keep", string(ledger.LeftPaused), "the sweep is paused fleet-wide: nothing would be abandoned until it is resumed")
		case res.Swept && verdict.Holds():
			p.Add(r.RunID, "keep", storm.Reason, "idle past the deadline, but the storm guard would stop the run before it abandoned anything")
		case res.Swept:
			p.Add(r.RunID, "abandon", ReasonIdle, fmt.Sprintf("idle %d ms (last moved %s, deadline %s)",
				now.Sub(res.Run.LastMovedAt).Milliseconds(), res.Run.LastMovedAt.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano)))
			switch {
			case res.InterlockReleased:
				stats.InterlocksReleased++
				p.Count("release_interlock", ReasonIdle, 1)
			case res.InterlockHolder != "":
				stats.InterlocksHeldByOther++
				p.Count("keep_interlock", "held_by_other_run", 1)
			}
		case res.Why == LeftNotIdle:
			stats.NotIdle++
			p.Add(r.RunID, "keep", string(res.Why), "")
		default:
			stats.Moved++
			p.Add(r.RunID, "keep", string(res.Why), "")
		}
	}
	if verdict.Holds() {
		return verdict.StepError()
	}
	return nil
}

// scan reads up to limit idle runs that decode, least recently moved first, reading past at most
// workflow.MalformedReadMax malformed ones (they are the oldest forever, and must not take the
// limit's places in every run).
func (w *Workflow) scan(ctx context.Context, deadline time.Time, limit int, stats *Stats, log *slog.Logger) ([]ledger.ExtensionRun, bool, error) {
	var idle []ledger.ExtensionRun
	var malformed workflow.Malformed
	defer func() { stats.Malformed = malformed.Report() }()
	read := 0
	page := func(ctx context.Context, after *ledger.Cursor, want int) ([]ledger.ExtensionRun, error) {
		return w.Store.ScanIdle(ctx, deadline, after, want)
	}
	cursor := func(last ledger.ExtensionRun) *ledger.Cursor {
		return &ledger.Cursor{At: last.LastMovedAt, ID: last.RunID}
	}
	want := func() int {
		if len(idle) >= limit {
			return 0
		}
		return min(limit-len(idle), limit+workflow.MalformedReadMax-read)
	}
	complete, err := agesweep.Pages(ctx, page, cursor, want, func(page []ledger.ExtensionRun, _ bool) bool {
		read += len(page)
		stats.Scanned += len(page)
		for _, r := range page {
			if r.Malformed != "" {
				malformed.Note(log, ledger.ExtensionRunsCollection+"/"+r.RunID, r.Malformed)
				continue
			}
			idle = append(idle, r)
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return idle, !complete && len(idle) < limit, nil
}

func pausedLeft(a ledger.Abandonment) (ledger.Abandonment, bool) {
	return ledger.Abandonment{Why: ledger.LeftPaused, Pause: a.Pause}, a.Pause != nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
