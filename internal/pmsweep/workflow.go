package pmsweep

import (
	"context"
	"encoding/json"
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

// Store is what the sweep needs of the task ledger; *ledger.TaskStore has it.
type Store interface {
	ScanWorking(ctx context.Context, queue string, after *ledger.Cursor, limit int) ([]ledger.Task, error)
	CountTasks(ctx context.Context, queue string) (int64, error)
	CountWorking(ctx context.Context, queue string, before time.Time) (int64, error)
	// ReclaimTask reads the pause documents pauses names with the task, and leaves it
	// (ledger.LeftPaused) when one holds.
	ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error)
	PreviewReclaim(ctx context.Context, queue, id string, pauses []string, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error)
	Invisible(ctx context.Context, queue string) (ledger.Invisible, error)
}

// Workflow is the sweep.
type Workflow struct{ agesweep.Sweep[Store, Config] }

// New returns the sweep.
func New(store Store, cfg Config, clock firestoreconn.Clock) *Workflow {
	return &Workflow{agesweep.New(store, cfg, clock)}
}

// Declared is the sweep's declaration: one run covers one task queue.
var Declared = workflow.Declaration{Type: contract.PMSweep, Scope: workflow.ScopeQueue, FromRequest: true, AgeBased: true}

// Definition returns the sweep as the engine runs it: atomic, since seed 001 defines no states.
func (w *Workflow) Definition() workflow.Definition {
	return ttlFloor.Definition(Declared, w.Config.TTLFloor, w.probe, agesweep.Body(func(ctx context.Context, run workflow.Run, in Input) (Output, Stats, error) {
		// The engine's dry run is the seed's dry_run: one path, one output.
		in.DryRun = in.DryRun || run.DryRun
		return w.runOnce(ctx, in, run.Overrides.Storm, Pauses(in.Queue, run.Overrides.Pause), run.Logger)
	}))
}

var ttlFloor = agesweep.Floor{Field: "ttl", Setting: "STALESWEEP_PM_TTL_FLOOR_SECONDS", Why: "a small TTL reclaims tasks whose workers are alive"}

// probe: a queue has work when its least recently active working task has been silent for the
// TTL, or cannot be read. A queue only close to the TTL gets no run, and so no warning, until one is past.
func (w *Workflow) probe(ctx context.Context, input json.RawMessage, now time.Time) (bool, error) {
	var in Input
	if err := json.Unmarshal(input, &in); err != nil {
		return false, err
	}
	oldest, err := w.Store.ScanWorking(ctx, in.Queue, nil, 1)
	if err != nil || len(oldest) == 0 {
		return false, err
	}
	t := oldest[0]
	return t.Malformed != "" || !t.LastActivityAt.After(now.Add(-time.Duration(in.TTL)*time.Second)), nil
}

// Pauses are the pause documents each reclaim reads with its task.
func Pauses(queue string, overridePause bool) []string {
	if overridePause {
		return nil
	}
	return pausestore.PauseIDs(string(Declared.Type), queue)
}

// Why the rule (Reclaimable) leaves a task it re-read: a worker was alive after all.
const (
	LeftNotWorking     ledger.Left = "not_working"     // it is no longer working
	LeftHeartbeatMoved ledger.Left = "heartbeat_moved" // its heartbeat head is not the one the sweep saw
	LeftActivityMoved  ledger.Left = "activity_moved"  // it was active since the sweep saw it
)

// Reclaimable is the rule a reclaim's transaction applies to the task as it re-reads it, seen
// being the task as the scan read it. A task reclaimed more than maxReclaims times (0: no cap)
// is failed as poison instead of requeued.
func Reclaimable(seen ledger.Task, maxReclaims int64) func(ledger.Task) ledger.ReclaimPlan {
	return func(t ledger.Task) ledger.ReclaimPlan {
		switch {
		case t.Status != ledger.TaskWorking:
			return ledger.ReclaimPlan{Left: LeftNotWorking}
		case t.HeartbeatTip != seen.HeartbeatTip:
			return ledger.ReclaimPlan{Left: LeftHeartbeatMoved}
		case !t.LastActivityAt.Equal(seen.LastActivityAt):
			return ledger.ReclaimPlan{Left: LeftActivityMoved}
		}
		if count := t.ReclaimCount + 1; maxReclaims > 0 && count > maxReclaims {
			return ledger.ReclaimPlan{Poison: fmt.Sprintf("reclaimed %d times (more than %d): a poison task, failed instead of requeued", count, maxReclaims)}
		}
		return ledger.ReclaimPlan{}
	}
}

// Stale is the seed's rule for a working task: silent for more than the TTL (a task silent for
// exactly the TTL is skipped).
func Stale(t ledger.Task, now time.Time, ttl time.Duration) bool {
	return now.Sub(t.LastActivityAt) > ttl
}

var guard = agesweep.Guard{Aged: "silent", Live: "working", Settling: "reclaiming"}

func ageSeconds(now, last time.Time) int64 { return int64(now.Sub(last) / time.Second) }

// RunOnce is one sweep of one queue. override lets it go ahead where the storm guard would
// stop it; a pause is never overridden. A dry run writes nothing, and a storm guard that would
// refuse it is a warning, not a failure.
func (w *Workflow) RunOnce(ctx context.Context, in Input, override bool, log *slog.Logger) (Output, Stats, error) {
	return w.runOnce(ctx, in, override, Pauses(in.Queue, false), log)
}

func (w *Workflow) runOnce(ctx context.Context, in Input, override bool, pauses []string, log *slog.Logger) (Output, Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Config.Budget)
	defer cancel()
	log = log.With("queue", in.Queue)
	ttl := time.Duration(in.TTL) * time.Second
	warnAt := ttl * 2 / 3
	out := Output{Reclaimed: []Reclaimed{}, Raced: []Raced{}, DryRun: in.DryRun, TTL: in.TTL}
	stats := Stats{RacedWhy: map[string]int{}}
	fail := func(step string, err error) (Output, Stats, error) {
		return out, stats, agesweep.StoreError(step, err)
	}
	now, err := w.Now(ctx)
	if err != nil {
		return out, stats, err
	}

	// The stale ones come first; the first that is neither stale nor close to the TTL ends the
	// reading, and so does a stale one past MaxStale.
	var stale []ledger.Task
	var longestLive time.Duration
	var malformed workflow.Malformed
	page := func(ctx context.Context, after *ledger.Cursor, want int) ([]ledger.Task, error) {
		return w.Store.ScanWorking(ctx, in.Queue, after, want)
	}
	cursor := func(last ledger.Task) *ledger.Cursor {
		return &ledger.Cursor{At: last.LastActivityAt, ID: last.ID}
	}
	pageSize := func() int { return w.Config.PageSize }
	if _, err := agesweep.Pages(ctx, page, cursor, pageSize, func(page []ledger.Task, _ bool) bool {
		for _, t := range page {
			if t.Malformed != "" {
				if malformed.Count == workflow.MalformedReadMax {
					stats.Capped = true // more unreadable tasks than one run reads past
					return false
				}
				malformed.Note(log, ledger.TaskQueuesCollection+"/"+in.Queue+"/"+ledger.TasksCollection+"/"+t.ID, t.Malformed)
				continue
			}
			age := now.Sub(t.LastActivityAt)
			switch {
			case Stale(t, now, ttl) && len(stale) == w.Config.MaxStale:
				stats.Capped = true
				return false
			case Stale(t, now, ttl):
				stale = append(stale, t)
			case age > warnAt:
				stats.NearTTL++
				longestLive = max(longestLive, age)
			default:
				return false
			}
		}
		return true
	}); err != nil {
		return fail("scan", err)
	}
	stats.Malformed = malformed.Report()
	// Only the working tasks are read (no other can be stale), the rest are counted.
	if out.Scanned, err = w.Store.CountTasks(ctx, in.Queue); err != nil {
		return fail("count", err)
	}
	n, err := w.Store.CountWorking(ctx, in.Queue, time.Time{})
	if err != nil {
		return fail("count", err)
	}
	inv, err := w.Store.Invisible(ctx, in.Queue)
	stats.Invisible = workflow.ReportInvisible(log, ledger.TaskQueuesCollection+"/"+in.Queue+"/"+ledger.TasksCollection, "last_activity_at", inv, err)
	if stats.NearTTL > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf(
			"%d working tasks have been silent for more than 2/3 of the TTL (longest %ds of %ds) without being stale yet: "+
				"heartbeat at most every TTL/3 (%ds) or they will be reclaimed while alive", stats.NearTTL, int64(longestLive/time.Second), in.TTL, in.TTL/3))
		log.Warn("tasks close to the TTL", "near_ttl", stats.NearTTL, "longest_silence_s", int64(longestLive/time.Second), "ttl", in.TTL)
	}

	// Every silent task counts, not only the ones this run handles.
	silent := int64(len(stale))
	if stats.Capped {
		if silent, err = w.Store.CountWorking(ctx, in.Queue, now.Add(-ttl)); err != nil {
			return fail("count", err)
		}
		silent = max(silent, int64(len(stale))) // a task read stale may have moved since
	}
	out.Stale = int(silent)
	stats.Deferred = int(silent) - len(stale)
	verdict := w.Config.Storm.Judge(silent, n).Override(override)
	stats.StormGuard = &verdict
	switch {
	case verdict.Holds() && in.DryRun:
		out.Warnings = append(out.Warnings, fmt.Sprintf("the storm guard would refuse this sweep: %d of %d working tasks are silent, more than the %d allowed", verdict.Aged, verdict.Live, verdict.Allowed))
	case verdict.Holds():
		guard.Held(log, verdict, "storm guard: silent tasks are too large a share of the working ones; reclaimed none", "ttl", in.TTL)
		return out, stats, verdict.StepError()
	case verdict.Overridden:
		guard.Overridden(log, verdict)
	}

	var p *explain.Preview
	if in.DryRun {
		p = agesweep.NewPreview(verdict, stats.Malformed)
		stats.Preview = p
		p.Count("defer", "max_stale", stats.Deferred)
	}
	results, errs, left := agesweep.Settle(ctx, stale, w.Config.Concurrency, func(ctx context.Context, t ledger.Task) (ledger.Reclaim, error) {
		if in.DryRun {
			return w.Store.PreviewReclaim(ctx, in.Queue, t.ID, pauses, Reclaimable(t, w.Config.MaxReclaims))
		}
		return w.Store.ReclaimTask(ctx, in.Queue, t.ID, in.Reclaimer, pauses, now, Reclaimable(t, w.Config.MaxReclaims))
	}, func(r ledger.Reclaim) (ledger.Reclaim, bool) {
		return ledger.Reclaim{Why: ledger.LeftPaused, Pause: r.Pause}, r.Pause != nil
	})

	for i, t := range stale {
		res, err := results[i], errs[i]
		age, last := ageSeconds(now, t.LastActivityAt), t.LastActivityAt.UTC().Format(ledger.EntryTimeLayout)
		l := log.With("task", t.ID, "slug", t.Slug)
		if p != nil {
			previewRow(p, t, res, err, ctx.Err() != nil, verdict.Holds(), age)
			l = slog.New(slog.DiscardHandler) // a dry run's rows are in its stats, not the log
		}
		switch {
		case err != nil && ctx.Err() != nil:
			stats.Deferred++
			stats.OutOfBudget = true
		case err != nil:
			stats.Errored++
			l.Warn("reclaim failed; nothing written", "error", err.Error())
		case res.Reclaimed && res.Poisoned:
			out.Poisoned = append(out.Poisoned, Reclaimed{Task: t.ID, Slug: t.Slug, AgeSeconds: age, LastActivity: last, ReclaimStatusSHA: res.StatusSHA})
			stats.Poisoned++
			l.Warn("task reclaimed too many times: failed as poison instead of requeued", alerts.RowSettled.Attr(), "path", alerts.PathSweep, "outcome", OutcomePoisoned, "max_reclaims", w.Config.MaxReclaims, "reclaim_status_sha", res.StatusSHA)
		case res.Reclaimed:
			out.Reclaimed = append(out.Reclaimed, Reclaimed{Task: t.ID, Slug: t.Slug, AgeSeconds: age, LastActivity: last, ReclaimStatusSHA: res.StatusSHA})
			l.Info("zombie task reclaimed", alerts.RowSettled.Attr(), "path", alerts.PathSweep, "outcome", OutcomeReclaimed, "age_seconds", age, "reclaim_status_sha", res.StatusSHA)
		case res.Why == ledger.LeftPaused:
			stats.Paused++
		default:
			out.Raced = append(out.Raced, Raced{Task: t.ID, Slug: t.Slug, AgeSeconds: age, LastActivity: last})
			stats.RacedWhy[string(res.Why)]++
			l.Info("task raced: its worker was alive after all", "why", res.Why)
		}
	}
	if left != nil && !in.DryRun {
		log.Warn("the sweep was paused while it ran (on the queue, or fleet-wide): the tasks left were not reclaimed", "paused", left.Pause.String(), "left", stats.Paused)
	}
	return out, stats, nil
}

func previewRow(p *explain.Preview, t ledger.Task, res ledger.Reclaim, err error, outOfBudget, held bool, age int64) {
	if agesweep.PreviewFailed(p, t.ID, err, outOfBudget) {
		return
	}
	silent := fmt.Sprintf("silent %ds (last activity %s)", age, t.LastActivityAt.UTC().Format(ledger.EntryTimeLayout))
	switch {
	case res.Why == ledger.LeftPaused:
		where := "on the queue"
		if res.Pause != nil && res.Pause.Fleet() {
			where = "fleet-wide"
		}
		p.Add(t.ID, "keep", string(ledger.LeftPaused), "the sweep is paused "+where+": nothing would be reclaimed until it is resumed")
	case res.Reclaimed && held:
		p.Add(t.ID, "keep", storm.Reason, silent+": would be reclaimed, but the storm guard would refuse the sweep")
	case res.Poisoned:
		p.Add(t.ID, "fail_as_poison", "max_reclaims", silent+": reclaimed too many times, would be failed instead of requeued")
	case res.Reclaimed:
		p.Add(t.ID, "reclaim", "silent_past_ttl", silent)
	default:
		p.Add(t.ID, "keep", string(res.Why), "its worker was alive after the scan")
	}
}
