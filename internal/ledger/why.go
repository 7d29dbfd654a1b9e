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

// Why a reclaim (TaskStore.ReclaimTask) left a task.
const (
	LeftTaskMissing    Left = "task_missing"    // the task is gone
	LeftNotWorking     Left = "not_working"     // it is no longer working
	LeftHeartbeatMoved Left = "heartbeat_moved" // its heartbeat head is not the one the sweep saw
	LeftActivityMoved  Left = "activity_moved"  // it was active since the sweep saw it
)

// Why an abandonment (ExtensionRunStore.Abandon) left a run.
const (
	LeftExtensionRunMissing Left = "run_missing" // the run is gone
	LeftNotRunning          Left = "not_running" // it finished (or was abandoned) since the scan
	LeftMoved               Left = "moved"       // it moved since the scan
	LeftNotIdle             Left = "not_idle"    // it is no longer idle past the deadline
)
