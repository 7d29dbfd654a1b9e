package ledger

// Left says why a settling transaction wrote nothing: the row's writer was alive after all, or
// another run got there first, or (LeftPaused) the workflow was paused; none is an error.
type Left string

// LeftPaused: the transaction read a pause of the workflow that holds on the run's scope.
const LeftPaused Left = "paused"

// The rows that are gone.
const (
	LeftTaskMissing         Left = "task_missing" // the task is gone (TaskStore.ReclaimTask)
	LeftExtensionRunMissing Left = "run_missing"  // the run is gone (ExtensionRunStore.Abandon)
)
