// Package executionsync is the execution-sync workflow (seed 003 for Cloud Run, seed 002 for
// Kubernetes, one body): find an organization's active runner executions nobody has confirmed
// for min_age_seconds and start one sync per row, which asks the executor about the execution
// and settles or refreshes the row in one transaction. A row without a usable provider_ref is
// counted (skipped_missing_metadata_count) and never sent anywhere.
//
// decide (pure) is the verdict table of docs/architecture.md ("Decide and settle").
//
// What holds:
//   - A row is settled at most once: the settling transaction re-reads it and writes only while
//     it is still active with the observed_at and provider_ref the scan saw. A second sweep, or
//     a duplicate sync, finds nothing to do and counts nothing as settled.
//   - A sync that learns nothing writes nothing: a row still unknown, since the same time, to the
//     same target, is not rewritten, but for once per keep-alive (half the blind-executor guard's
//     window) so that the guard, which counts rows by sync.last_synced_at within its window,
//     keeps counting it (quiet).
//   - An executor error settles nothing; one that stops calls (executor.Stops) defers the run's
//     remaining rows to the next run.
//   - A run never outlives its budget: syncs not started when it is spent are deferred; a sync
//     cut short mid-transaction commits nothing.
//   - A dry run (preview.go) makes the same scan, executor calls and decisions and writes
//     nothing; Explain (explain.go) is that dry sync for one row.
//   - Counts add up: candidate_count = started_count + skipped_missing_metadata_count +
//     failed_start_count.
package executionsync
