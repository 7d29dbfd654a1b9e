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
// The engine auto-advances through every state before the last but one, runs the body in that
// state (reconciling, or pending), and moves to the final state with the body's output, or to
// failed with the failure fields (failure_reason, failure_type, failed_step, failed_layer,
// failed_at_state, failed_action, error, error_type).
//
// What holds:
//   - Invalid input writes nothing: no record, no row. The caller gets a *contract.ValidationError
//     naming the field and the rule.
//   - Every run that starts has exactly one record, and every transition is checked against the
//     record's current state inside a transaction, so a record never moves backwards or out of a
//     terminal state.
//   - The final transition is written even when the body ran out of its budget or the caller's
//     context ended: it uses a detached context with its own timeout.
//   - A run's guard lives as long as its record is open and the run is alive: taken with the
//     record (a GuardLease), renewed every third of a lease while the body works (never past
//     GuardTTL from its acquisition), and deleted only by the transaction that ends the record.
//     A run whose process died, or whose final write failed, leaves both; one lease later the
//     next run of the scope takes the guard over and ends the record failed / run_abandoned.
//   - A write whose answer was lost is read back, not guessed: an ended record is the outcome,
//     and a start whose record and guard are this run's started.
//   - A run whose store fails StoreBreakerThreshold row transactions in a row stops at once
//     (store_unavailable), its rows in flight cancelled; each row's transaction writes all or
//     nothing.
package workflow
