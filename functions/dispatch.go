package functions

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// Dispatch fans a tick out: one sweep message per scope of its workflow (pipeline.Dispatcher).
func Dispatch(w http.ResponseWriter, r *http.Request) { servePush(w, r, "Dispatch", dispatch) }

// HeaderPublished is the response header in which a Dispatch delivery says how many sweep
// messages it published: one per scope with work (its probe found some), none for a quiet one.
const HeaderPublished = "Stalesweep-Published"

func dispatch(ctx context.Context, d delivery) error {
	start, err := message.ParseStart(d.msg.Data)
	if err != nil {
		d.log.ErrorContext(ctx, "malformed tick acknowledged without a dispatch", "error", err.Error())
		return nil
	}
	resume, err := message.Continuation(d.msg.Attributes, d.msg.MessageID) // TickID never empty: DecodePush falls back to the event id
	if err != nil {
		d.log.ErrorContext(ctx, "malformed tick continuation acknowledged without a dispatch", "error", err.Error())
		return nil
	}
	a, err := deps.Get(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	p, err := a.Pipeline(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	rep, err := p.Dispatcher.Dispatch(ctx, pipeline.Tick{
		WorkflowType: start.WorkflowType,
		InitialData:  start.InitialData,
		Trigger:      string(trigger(d.msg)),
		Actor:        pushActor(a.Config.Topics.Ticks),
		ClaimedActor: d.msg.Attributes[message.AttrActor],
		TickID:       resume.TickID,
		After:        resume.After,
		Roster:       resume.Roster,
	})
	// For an operator invoking Dispatch by hand, and the tests; Pub/Sub ignores it.
	d.header.Set(HeaderPublished, strconv.Itoa(rep.Published))
	switch {
	case err != nil && contract.CodeOf(err) == contract.CodeValidationFailed:
		d.log.ErrorContext(ctx, "invalid tick acknowledged without a dispatch", "workflow_type", string(start.WorkflowType), "error", err.Error())
		return nil
	case err != nil:
		d.log.WarnContext(ctx, "dispatch incomplete", "report", rep, "error", err.Error())
		return fmt.Errorf("dispatch: %w", err)
	}
	d.log.InfoContext(ctx, "dispatch completed", "report", rep)
	return nil
}
