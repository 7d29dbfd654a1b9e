package functions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Sweep runs one workflow run on one scope for a message on the sweeps topic (message.Start as
// data, its workflow_run_uuid attribute naming the run); its syncs go to the syncs topic.
func Sweep(w http.ResponseWriter, r *http.Request) { servePush(w, r, "Sweep", sweep) }

func sweep(ctx context.Context, d delivery) error {
	start, err := message.ParseStart(d.msg.Data)
	if err != nil {
		d.log.ErrorContext(ctx, "malformed sweep message acknowledged without a run", "error", err.Error())
		return nil
	}
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	p, err := a.Pipeline(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	out, err := p.Engine.Start(ctx, workflow.Request{
		Type:         start.WorkflowType,
		InitialData:  start.InitialData,
		Trigger:      trigger(d.msg),
		Actor:        pushActor(a.Config.Topics.Sweeps),
		ClaimedActor: d.msg.Attributes[message.AttrActor],
		RunUUID:      d.msg.Attributes[message.AttrWorkflowRunUUID],
	})
	return acknowledge(ctx, d.log.With("workflow_type", string(start.WorkflowType)), out, err)
}

// pushActor is who a push verifiably came from (the package doc): the subscription of topic.
func pushActor(topic string) string { return "pubsub:" + topic }

// acknowledge maps a run's end to the event's (the package doc's acknowledgement).
func acknowledge(ctx context.Context, log *slog.Logger, out workflow.Outcome, err error) error {
	switch {
	case err == nil && out.Status == workflow.StateFailed && workflow.Transient(out.Err):
		return fmt.Errorf("run %s failed transiently: %w", out.RunUUID, out.Err)
	case err == nil:
		return nil
	case errors.Is(err, workflow.ErrDuplicateRun):
		log.InfoContext(ctx, "duplicate delivery of a run that already started; acknowledged", "workflow_run_uuid", out.RunUUID)
		return nil
	case errors.Is(err, ledger.ErrOrganizationDisabled):
		log.WarnContext(ctx, "skipped: the organization opted out of sweeps; acknowledged without a run", "error", err.Error())
		return nil
	case errors.Is(err, ledger.ErrPaused):
		// Acknowledged: redelivering would only meet the pause again, and a tick after the
		// resume sweeps the scope.
		log.WarnContext(ctx, "skipped: the workflow is paused on this scope; acknowledged without a run", "workflow_run_uuid", out.RunUUID, "error", err.Error())
		return nil
	case errors.Is(err, runstore.ErrGuardHeld):
		log.InfoContext(ctx, "skipped: another run of this workflow on this scope is in progress", "workflow_run_uuid", out.RunUUID, "error", err.Error())
		return nil
	case contract.CodeOf(err) == contract.CodeValidationFailed, contract.CodeOf(err) == contract.CodeForbidden:
		log.ErrorContext(ctx, "invalid or forbidden message acknowledged without a run", "error", err.Error())
		return nil
	default:
		return fmt.Errorf("sweep: %w", err)
	}
}
