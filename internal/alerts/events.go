// Package alerts is the one list of the log events an operator watches. From it `stalesweep
// alerts` (cmd/stalesweep/alerts_render.go) generates a logs-based metric per event, an alert
// policy for the ones that page, and one dashboard, written as terraform/alerts.tf.json (checked
// by a test like the Firestore indexes).
//
// What holds:
//   - A listed log line carries a stable `event` field (Event.Attr), set by the same constant
//     the generator filters on, so a metric never depends on a message's prose. Messages may
//     change; event names and the fields a metric extracts may not without regenerating.
//   - Every field a metric extracts as a label is on every line of its event (a test runs the
//     demo and incident scenarios and checks each listed event against its metric with Matches).
//   - The package imports nothing of stalesweep's, so every package that logs can import it.
package alerts

import "log/slog"

// Key is the jsonPayload field naming a listed event.
const Key = "event"

// Event is the value of a listed log line's `event` field.
type Event string

// The listed events. Each is logged by exactly the call sites named in its doc comment.
const (
	// RowSettled: one row settled by a sweep (executionsync: a runner execution settled;
	// runssweep and leasesettle: abandoned; pmsweep: reclaimed or failed as poison). Fields:
	// workflow_type, outcome.
	RowSettled Event = "row_settled"
	// StormGuardTripped: a run refused to settle a too-large share of its scope (internal/storm)
	// and failed with storm_guard. Fields: workflow_type.
	StormGuardTripped Event = "storm_guard_tripped"
	// BlindExecutor: an executor target was judged blind (internal/blindguard): none of its rows
	// is settled lost until an operator clears it. Fields: target.
	BlindExecutor Event = "blind_executor"
	// InvisibleRows: a run counted active rows no scan can see (ledger.ReportInvisible). Fields:
	// workflow_type (and collection, which names the queue of a pm.sweep: not a label).
	InvisibleRows Event = "invisible_rows"
	// RunFailed: a workflow run ended failed (the engine's summary line). Fields: workflow_type,
	// failure_reason.
	RunFailed Event = "run_failed"
	// DispatchDeferred: a dispatch ran out of budget before publishing every scope of its tick
	// (internal/pipeline). Fields: workflow_type.
	DispatchDeferred Event = "dispatch_deferred"
	// DispatchCapped: a dispatch's list without a cursor (queues, runner groups) stopped at its
	// limit: the rest are not swept this tick (internal/pipeline). Fields: workflow_type.
	DispatchCapped Event = "dispatch_capped"
)

// Attr is the attribute that marks a log line as e.
func (e Event) Attr() slog.Attr { return slog.String(Key, string(e)) }
