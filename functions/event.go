package functions

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// delivery is one Pub/Sub message handed to an event target, with a logger carrying its ids.
type delivery struct {
	msg    message.PubSub
	log    *slog.Logger
	header http.Header // the response's: a handler may say what it did in it
}

// handleFunc handles one delivered message: nil acknowledges it, an error asks for a redelivery.
type handleFunc func(ctx context.Context, d delivery) error

// servePush is the HTTP face of the event targets (the package doc); 405 for a method but POST.
func servePush(w http.ResponseWriter, r *http.Request, target string, handle handleFunc) {
	ctx := r.Context()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, r.Method+" is not allowed: deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, message.MaxPushBytes+1)
	push, err := message.DecodePush(r)
	log := logger().With("target", target, "event_id", push.EventID, "event_type", push.EventType, "push_shape", string(push.Shape))
	if push.Traceparent != "" {
		log = log.With("traceparent", push.Traceparent)
	}
	var ve *contract.ValidationError
	switch {
	case errors.As(err, &ve):
		log.ErrorContext(ctx, "malformed event acknowledged without a run", "error", err.Error())
		w.WriteHeader(http.StatusOK)
		return
	case err != nil: // the body broke off: the message never arrived whole, a redelivery may
		log.WarnContext(ctx, "delivery not read whole; answered 500 for a redelivery", "error", err.Error())
		http.Error(w, "the delivery could not be read", http.StatusInternalServerError)
		return
	}
	d := delivery{msg: push.Message, log: log.With("message_id", push.Message.MessageID), header: w.Header()}
	if err := handle(ctx, d); err != nil {
		d.log.ErrorContext(ctx, "delivery failed; answered 500 for a redelivery", "error", err.Error())
		http.Error(w, "the message was not handled; redeliver it", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func trigger(msg message.PubSub) workflow.Trigger {
	if msg.Attributes[message.AttrTrigger] == string(workflow.TriggerManual) {
		return workflow.TriggerManual
	}
	return workflow.TriggerSchedule
}
