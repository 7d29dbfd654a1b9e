// Package workflow runs one workflow run from request to record: it validates the input
// against the workflow's contract, records the run in sweep_runs, walks the run through its
// seed's state machine around the workflow's body, and assembles the output the seed lists.
//
// State machines (each seed's "States" and "Transitions" tables):
//
//	linear (seeds 002, 003):  initiated --reconcile--> reconciling --complete--> completed
//	atomic (seed 004):        pending --execute--> completed
//	any state --fail--> failed
//
// What holds:
//   - Invalid input writes nothing: no record, no row.
//   - Every run that starts has exactly one record, and every transition is checked against the
//     record's current state inside a transaction, so a record never moves backwards or out of a
//     terminal state.
//   - The final transition is written under a detached context with its own timeout, even when
//     the body's budget or the caller's context ended.
//   - A run's guard is deleted only by the transaction that ends its record. A run that died
//     leaves both; one lease later the next run of the scope takes the guard over and ends the
//     record failed / run_abandoned (docs/data-model.md has the lease).
//   - A write whose answer was lost is read back, not guessed.
//   - StoreBreakerThreshold row transactions failing in a row stop the run (store_unavailable);
//     each row's transaction writes all or nothing.
package workflow
