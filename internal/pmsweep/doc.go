// Package pmsweep is pm.sweep (seed 001): walk one task queue for zombie tasks — working, but
// silent for longer than the TTL — and reclaim them back to new, race-safe against a worker
// that is still alive.
//
// A stale task is reclaimed in one transaction that appends a preempt heartbeat on the head the
// sweep saw and a reclaim status; it commits only if that head, the task's activity and its
// working status are unchanged, so a live worker that landed a write in between keeps the task
// (raced), and two sweeps at once append at most one reclaim status. The reclaimed worker is then
// fenced: every write it tries fails with "head moved".
//
// The model gap, as the seed states it: a live worker that does not heartbeat within the TTL will
// be reclaimed. Heartbeat at most every TTL/3.
//
// Beyond the seed: a task reclaimed more than MaxReclaims times is failed instead of requeued, so a
// poison task cannot cycle forever.
package pmsweep
