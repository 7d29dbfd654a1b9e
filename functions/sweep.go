package functions

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Sweep runs one workflow run for a Pub/Sub message whose data is {"workflow_type",
// "initial_data"}. A malformed or invalid message is logged at ERROR and acknowledged (nil): it
// would fail the same way forever. A failure worth retrying (the run could not start, or failed
// transiently) returns an error, so a trigger with retries on redelivers it.
func Sweep(ctx context.Context, e event.Event) error {
	log := logger().With("event_id", e.ID(), "event_type", e.Type())
	msg, err := message.ParsePubSub(e.Data())
	if err != nil {
		log.Error("malformed event acknowledged without a run", "error", err.Error())
		return nil
	}
	log = log.With("message_id", msg.MessageID)
	start, err := message.ParseStart(msg.Data)
	if err != nil {
		log.Error("malformed message acknowledged without a run", "error", err.Error())
		return nil
	}
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	trigger := workflow.TriggerSchedule
	if t := msg.Attributes["trigger"]; t == string(workflow.TriggerManual) {
		trigger = workflow.TriggerManual
	}
	out, err := a.Engine.Start(ctx, workflow.Request{
		Type: start.WorkflowType, InitialData: start.InitialData, Trigger: trigger, Actor: msg.Attributes["actor"],
	})
	return settle(log, start, out, err)
}

// settle maps a run's end to the event's acknowledgement.
func settle(log *slog.Logger, start message.Start, out workflow.Outcome, err error) error {
	switch {
	case err != nil && contract.CodeOf(err) == contract.CodeValidationFailed:
		log.Error("invalid message acknowledged without a run", "workflow_type", string(start.WorkflowType), "error", err.Error())
		return nil
	case err != nil:
		return fmt.Errorf("sweep %s: %w", start.WorkflowType, err)
	case out.Status == workflow.StateFailed && workflow.Transient(out.Err):
		return fmt.Errorf("sweep %s: run %s failed transiently: %w", start.WorkflowType, out.RunUUID, out.Err)
	}
	return nil
}

func attrs(a []slog.Attr) []any {
	out := make([]any, len(a))
	for i, x := range a {
		out[i] = x
	}
	return out
}
