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
	// IncludeDisabled lets the sync settle a row of an organization that opted out: the
	// operator's command, told to. Never on the wire: a message cannot ask for it.
	IncludeDisabled bool `json:"-"`
	// OverridePause lets the sync write though its workflow is paused on the organization: the
	// inline syncs of a run the command or the HTTP face was told to override the pause with.
	// Never on the wire, so no message overrides a pause.
	OverridePause bool `json:"-"`
}

// Validate checks a request that came from outside the process (a sync message), naming the
// field and the rule it breaks.
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

// ParseSync reads the data of a message on the syncs topic: exactly one JSON object of a Sync,
// no unknown fields, at most MaxBodyBytes, and valid (Sync.Validate). The syncs topic is written by Sweep only, but it is still a topic: a
// message on it is outside input until it has passed here.
//
// On a rejection the request holds whatever was decoded, so the log can name the row.
func ParseSync(raw []byte) (Sync, error) {
	var req Sync
	if err := decodeOne(raw, &req); err != nil {
		return req, err
	}
	return req, req.Validate()
}
