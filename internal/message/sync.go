package message

import (
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Sync is a message on the syncs topic, and the request for one row's sync on every path: it
// carries what the scan saw, so the sync can tell whether the row moved in between.
type Sync struct {
	WorkflowRunUUID     string         `json:"workflow_run_uuid"`
	OrganizationUUID    string         `json:"organization_uuid"`
	RunnerExecutionUUID string         `json:"runner_execution_uuid"`
	Provider            string         `json:"provider"`
	ProviderRef         map[string]any `json:"provider_ref"`
	ObservedAt          time.Time      `json:"observed_at"`
	// IncludeDisabled: workflow.Request.IncludeDisabled. Never on the wire.
	IncludeDisabled bool `json:"-"`
	// OverridePause: workflow.Request.OverridePause, for a run's inline syncs. Never on the
	// wire, so no message overrides a pause.
	OverridePause bool `json:"-"`
}

// Validate checks a sync request that came from outside the process, naming the field and rule.
func (r Sync) Validate() error {
	switch {
	case r.WorkflowRunUUID == "":
		return contract.Invalid("workflow_run_uuid", "required", "is required")
	case ledger.CheckDocID(r.WorkflowRunUUID) != nil:
		return contract.Invalid("workflow_run_uuid", "format", "must be a document id: it %v", ledger.CheckDocID(r.WorkflowRunUUID))
	case uuid.Validate(r.OrganizationUUID) != nil:
		return contract.Invalid("organization_uuid", "format", "must be a UUID")
	case r.RunnerExecutionUUID == "":
		return contract.Invalid("runner_execution_uuid", "required", "is required")
	case ledger.CheckDocID(r.RunnerExecutionUUID) != nil:
		return contract.Invalid("runner_execution_uuid", "format", "must be a document id: it %v", ledger.CheckDocID(r.RunnerExecutionUUID))
	case r.Provider == "":
		return contract.Invalid("provider", "required", "is required")
	case len(r.ProviderRef) == 0:
		return contract.Invalid("provider_ref", "required", "is required")
	case r.ObservedAt.IsZero():
		return contract.Invalid("observed_at", "required", "is required")
	}
	return nil
}

// ParseSync reads the data of a message on the syncs topic by DecodeStart's rules, and validates
// it: Sweep alone writes the topic, but it is still outside input. On a rejection the request holds
// whatever was decoded, so the log can name the row.
func ParseSync(raw []byte) (Sync, error) {
	var req Sync
	if err := decodeOne(raw, &req); err != nil {
		return req, err
	}
	return req, req.Validate()
}
