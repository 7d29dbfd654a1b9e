package contract

// WorkflowType names a workflow exactly as its seed document does.
type WorkflowType string

// The workflow types stalesweep knows. Each has an input schema in schemas/ named after it.
const (
	ExecutionSyncCloudRun WorkflowType = "runner.execution-sync-stale-cloud-run"
)

// WorkflowTypes lists every known workflow type, in a stable order.
func WorkflowTypes() []WorkflowType {
	return []WorkflowType{ExecutionSyncCloudRun}
}

// Known reports whether t is a workflow type stalesweep implements.
func (t WorkflowType) Known() bool {
	for _, k := range WorkflowTypes() {
		if k == t {
			return true
		}
	}
	return false
}
