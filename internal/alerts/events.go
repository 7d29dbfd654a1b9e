// Package alerts is the one list of the log events an operator watches, from which `stalesweep
// alerts` generates the logs-based metrics, alert policies and dashboard (terraform/alerts.tf.json).
//
// What holds:
//   - A listed log line carries a stable `event` field (Event.Attr), so a metric never depends on a
//     message's prose; event names and extracted fields change only with a regeneration.
//   - Every field a metric extracts as a label is on every line of its event (a test checks the
//     demo and incident scenarios with Matches).
//   - The package imports nothing of stalesweep's, so every package that logs can import it.
package alerts

import "log/slog"

// Key is the jsonPayload field naming a listed event.
const Key = "event"

// Event is the value of a listed log line's `event` field.
type Event string

// The listed events, each logged by exactly the call sites its comment names.
const (
	// RowSettled: a row settled by a sweep (executionsync, runssweep, leasesettle, pmsweep).
	RowSettled Event = "row_settled"
	// StormGuardTripped: a run the storm guard stopped (internal/storm).
	StormGuardTripped Event = "storm_guard_tripped"
	// BlindExecutor: an executor target judged blind (internal/blindguard).
	BlindExecutor Event = "blind_executor"
	// InvisibleRows: a run counted active rows no scan can see (workflow.ReportInvisible); its
	// collection is not a label, since it names a pm.sweep's queue.
	InvisibleRows Event = "invisible_rows"
	// RunFailed: a workflow run ended failed (the engine's summary line).
	RunFailed Event = "run_failed"
	// DispatchDeferred: a dispatch ran out of budget before publishing its tick (internal/pipeline).
	DispatchDeferred Event = "dispatch_deferred"
	// DispatchCapped: a dispatch's list without a cursor stopped at its limit (internal/pipeline).
	DispatchCapped Event = "dispatch_capped"
)

// The paths a RowSettled line's "path" field names: a sweep's run (every workflow's), or the
// event path's completion entry (execution syncs only).
const (
	PathSweep = "sweep"
	PathEvent = "event"
)

// Attr is the attribute that marks a log line as e.
func (e Event) Attr() slog.Attr { return slog.String(Key, string(e)) }
