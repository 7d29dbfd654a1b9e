package functions

import (
	"context"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// pubsubMessage reads the Pub/Sub message out of a messagePublished CloudEvent (or a raw push
// body the framework converted). ok is false when the event was malformed; it has been logged
// at ERROR, and the caller acknowledges it.
func pubsubMessage(ctx context.Context, e event.Event, target string) (message.PubSub, *slog.Logger, bool) {
	log := logger().With("target", target, "event_id", e.ID(), "event_type", e.Type())
	if tp, ok := e.Extensions()["traceparent"].(string); ok {
		log = log.With("traceparent", tp)
	}
	msg, err := message.ParsePubSub(e.Data())
	if err != nil {
		log.ErrorContext(ctx, "malformed event acknowledged without a run", "error", err.Error())
		return message.PubSub{}, nil, false
	}
	if msg.MessageID == "" {
		msg.MessageID = e.ID()
	}
	return msg, log.With("message_id", msg.MessageID), true
}

// trigger reads a message's trigger attribute: manual when it says so, else schedule.
func trigger(msg message.PubSub) workflow.Trigger {
	if msg.Attributes["trigger"] == string(workflow.TriggerManual) {
		return workflow.TriggerManual
	}
	return workflow.TriggerSchedule
}
