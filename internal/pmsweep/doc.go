// Package pmsweep is pm.sweep (seed 001): walk one task queue for zombie tasks — working, but
// silent for longer than the TTL — and reclaim them back to new, race-safe against a worker
// that is still alive.
//
// A task's last activity is the latest created_at across its status, report and heartbeat
// chains (kept on the task as last_activity_at by every append). Tasks whose age is at most the
// TTL are skipped. A stale task is reclaimed in one transaction that appends a preempt
// heartbeat whose predecessor is the heartbeat head the sweep saw, and a reclaim status (new,
// reclaimed, reclaimer); it commits only if that head, the task's activity and its working
// status are unchanged. If a live worker's heartbeat (or report, or completion) landed in
// between, the task goes to raced and the worker keeps it. Two sweeps at once append at most one
// reclaim status per task: the second finds the head moved.
//
// Once reclaimed, the old worker is a zombie: every write it tries is fenced on the heartbeat
// head it holds, which the preempt heartbeat moved, and fails with "head moved".
//
// The model gap, as the seed states it: a live worker that does not heartbeat within the TTL
// will be reclaimed. Heartbeat at most every TTL/3; the sweep warns when tasks of the queue go
// silent for more than 2/3 of the TTL without being stale yet.
//
// Beyond the seed: reclaim_count on the task, and a cap — a task reclaimed more than
// MaxReclaims times is failed with a reason instead of requeued, so a poison task cannot cycle
// forever.
//
// A dry run — the seed's dry_run and the engine's are one path — is the same sweep up to the
// first write: each stale task is re-read in a read-only transaction and decided by the reclaim's
// rule (TaskStore.PreviewReclaim), and nothing is written; the output is the seed's, and
// stats.dry_run says task by task what it would do. Explain judges one task the same way.
package pmsweep
