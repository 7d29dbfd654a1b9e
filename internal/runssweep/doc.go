// Package runssweep is platform.extension.runs.sweep (seed 000): close app invocations left
// running by a process that died mid-run. Every running invocation, of every tenant, whose last
// movement is older than the caller's deadline is marked failed with outcome "abandoned", and a
// background invocation's one-live-run interlock is released with it.
//
// Where it may run — its deadline comes from the caller, unclamped, so on a wire it would be a
// fleet-wide kill switch:
//
//	HTTP (StartWorkflow)                      never: 403 forbidden, before anything is read
//	scheduled path (Dispatch → Sweep)         with a floor on older_than_ms (default 60000 ms);
//	                                          below it the run is refused as validation_failed
//	stalesweep run (the operator's process)   unclamped, for operators and tests
//
// What holds:
//   - One transaction per invocation re-reads it and abandons it only if it is still running,
//     has not moved since the scan, and is still idle past the deadline.
//   - An interlock is deleted only when it names the abandoned invocation. Reads come before writes.
//   - Idempotent and safe to run concurrently: two sweeps racing on one invocation abandon it once.
package runssweep
