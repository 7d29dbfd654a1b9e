package functions

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/message"
)

// SyncExecution syncs one runner execution for a syncs-topic message, once (Syncer.SyncOnce).
func SyncExecution(w http.ResponseWriter, r *http.Request) {
	servePush(w, r, "SyncExecution", syncExecution)
}

func syncExecution(ctx context.Context, d delivery) error {
	req, err := message.ParseSync(d.msg.Data)
	log := d.log.With("workflow_run_uuid", req.WorkflowRunUUID, "organization_uuid", req.OrganizationUUID,
		"runner_execution_uuid", req.RunnerExecutionUUID)
	if err != nil {
		log.ErrorContext(ctx, "malformed or invalid sync message acknowledged", "error", err.Error())
		return nil
	}
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("sync execution: %w", err)
	}
	syncer, ok := a.Syncers[req.Provider]
	if !ok {
		log.ErrorContext(ctx, "sync message for a provider this build does not sync; acknowledged", "provider", req.Provider)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.SyncBudget())
	defer cancel()
	res := syncer.SyncOnce(ctx, req)
	if res.Transient() {
		return fmt.Errorf("sync execution %s: %s: %v", req.RunnerExecutionUUID, res.Outcome, res.Err)
	}
	switch res.Outcome {
	case executionsync.SyncErrored:
		log.ErrorContext(ctx, "sync failed for good; acknowledged", "layer", res.Layer, "error", res.Err.Error())
	case executionsync.SyncRefused: // logged by the syncer, at ERROR unless the organization opted out
		log.InfoContext(ctx, "sync refused; acknowledged", "refused", res.Why)
	case executionsync.SyncUnknown:
		if res.Why == executionsync.WhyBlindExecutor {
			log.ErrorContext(ctx, "blind executor: the row is past the lost grace but its target is blind; not settled lost (stalesweep executors clear, after checking)", "target", res.Target)
		}
	}
	return nil
}
