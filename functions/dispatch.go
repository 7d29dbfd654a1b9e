package functions

import (
	"cmp"
	"context"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// Dispatch fans a tick out: one sweep message per scope of the tick's workflow. The tick's data
// is {"workflow_type", "initial_data"}; the runs it starts are named after the tick's message
// id, so a redelivered tick starts nothing twice.
func Dispatch(ctx context.Context, e event.Event) error {
	msg, log, ok := pubsubMessage(ctx, e, "Dispatch")
	if !ok {
		return nil
	}
	start, err := message.ParseStart(msg.Data)
	if err != nil {
		log.ErrorContext(ctx, "malformed tick acknowledged without a dispatch", "error", err.Error())
		return nil
	}
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	rep, err := a.Dispatcher.Dispatch(ctx, pipeline.Tick{
		WorkflowType: start.WorkflowType,
		InitialData:  start.InitialData,
		Trigger:      string(trigger(msg)),
		Actor:        msg.Attributes[pipeline.AttrActor],
		TickID:       cmp.Or(msg.MessageID, e.ID()),
	})
	switch {
	case err != nil && contract.CodeOf(err) == contract.CodeValidationFailed:
		log.ErrorContext(ctx, "invalid tick acknowledged without a dispatch", "workflow_type", string(start.WorkflowType), "error", err.Error())
		return nil
	case err != nil:
		log.WarnContext(ctx, "dispatch incomplete", "report", rep, "error", err.Error())
		return fmt.Errorf("dispatch: %w", err)
	}
	log.InfoContext(ctx, "dispatch completed", "report", rep)
	return nil
}
