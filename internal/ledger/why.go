package ledger

// Left says why a settling transaction wrote nothing: what it found on re-reading the row that
// no longer supports the decision the scan made. Each means the row's writer was alive after
// all, or another run got there first; none is an error. LeftPaused is the one that is not
// about the row: the workflow was paused on the run's scope.
type Left string

// LeftPaused: the transaction read a pause of the workflow that holds on the run's scope (or
// fleet-wide), and wrote nothing (ActivePause). Abandon, ReclaimTask and AbandonLease (as its
// refusal) return it.
const LeftPaused Left = "paused"

// The rows that are gone; each rule names its own other reasons (runssweep.LeftNotIdle,
// pmsweep.LeftNotWorking, ...).
const (
	LeftTaskMissing         Left = "task_missing" // the task is gone (TaskStore.ReclaimTask)
	LeftExtensionRunMissing Left = "run_missing"  // the run is gone (ExtensionRunStore.Abandon)
)
