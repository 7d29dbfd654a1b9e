package executor

import "time"

// Verdict is what an executor says about an execution.
type Verdict string

// The verdicts. Running covers every non-terminal state (pending, reconciling, cancelling,
// finishing); Unknown is an execution the executor does not know (NotFound).
const (
	VerdictRunning   Verdict = "running"
	VerdictSucceeded Verdict = "succeeded"
	VerdictFailed    Verdict = "failed"
	VerdictCancelled Verdict = "cancelled"
	VerdictUnknown   Verdict = "unknown"
)

// Terminal reports whether v settles an execution for good.
func (v Verdict) Terminal() bool {
	return v == VerdictSucceeded || v == VerdictFailed || v == VerdictCancelled
}

// Snapshot is one observation of one execution.
type Snapshot struct {
	Verdict Verdict
	// FinishedAt is from the executor's own record; zero when not terminal or not given.
	FinishedAt time.Time
	// Reason is the executor's own words (a condition reason or message).
	Reason string
	// Pending, for a running execution whose outcome is already known (a Kubernetes Job that met
	// its success or failure criteria while its pods terminate), is that outcome; empty otherwise.
	Pending Verdict
	// Evidence is the executor's snapshot as stored in a settlement: conditions, task counts,
	// etag, log URI. Values are Firestore-storable (strings, int64, bool, time.Time, maps, slices).
	Evidence map[string]any
}
