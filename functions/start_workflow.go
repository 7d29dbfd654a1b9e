package functions

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// The response headers naming the run a StartWorkflow answer reports on (its workflow_run_uuid
// and final status): headers because the body is the seed's output, which allows no other property.
const (
	HeaderWorkflowRunUUID   = "Stalesweep-Workflow-Run-Uuid"
	HeaderWorkflowRunStatus = "Stalesweep-Workflow-Run-Status"
)

// StartWorkflow runs one workflow run on one scope for a manual caller, with its syncs inline,
// and answers with the output or {"error": {"code", "message", "details"}} (docs/operations.md
// lists the codes); a recorded run is named in the headers.
func StartWorkflow(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := logger()
	if r.Method != http.MethodPost {
		// Answered before anything is built or verified: a probe with the wrong method costs
		// nothing and learns nothing.
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]any{
			"code": "method_not_allowed", "message": r.Method + " is not allowed; use POST"}})
		return
	}
	a, err := deps.Get(ctx)
	if err != nil {
		log.ErrorContext(ctx, "dependencies unavailable", "error", err.Error())
		writeError(w, contract.Errorf(contract.CodeInternal, "the service is not ready; retry shortly"))
		return
	}
	log = log.With(anys(logging.TraceAttrs(r, a.Config.Project))...)
	v, err := verifier.Get(ctx)
	if err != nil {
		log.ErrorContext(ctx, "authentication is not configured; refusing every request", "error", err.Error())
		writeError(w, contract.Errorf(contract.CodeInternal, "authentication is not configured"))
		return
	}
	caller, err := v.Verify(r)
	if err != nil {
		log.WarnContext(ctx, "caller refused", "error", err.Error())
		writeError(w, err)
		return
	}
	log = log.With("actor", caller.String())
	start, err := message.DecodeStartRequest(http.MaxBytesReader(w, r.Body, message.MaxBodyBytes+1))
	if err != nil {
		log.WarnContext(ctx, "start request refused", "error", err.Error())
		writeError(w, err)
		return
	}
	if def, ok := a.Engine.Definition(start.WorkflowType); ok && !def.FromRequest {
		log.WarnContext(ctx, "workflow not reachable from a request", "workflow_type", string(start.WorkflowType))
		writeError(w, contract.Errorf(contract.CodeForbidden,
			"%s cannot be started by a request: its deadline is the caller's, so on the wire it would be a fleet-wide kill switch; it runs only from the scheduled path and the stalesweep command", start.WorkflowType))
		return
	}
	out, err := a.Engine.Start(ctx, workflow.Request{
		Type:        start.WorkflowType,
		InitialData: start.InitialData,
		Trigger:     workflow.TriggerManual,
		Actor:       caller.String(),
		DryRun:      start.DryRun,
		Overrides:   workflow.Overrides{Pause: start.OverridePause},
	})
	switch {
	case err != nil:
		if contract.CodeOf(err) == contract.CodeInternal {
			log.ErrorContext(ctx, "workflow run could not start", "workflow_type", string(start.WorkflowType), "error", err.Error())
		}
		writeError(w, err)
	case out.Status == workflow.StateFailed:
		nameRun(w, out)
		details := map[string]any{"workflow_run_uuid": out.RunUUID, "output": out.Output}
		if out.DryRun {
			details["dry_run"], details["stats"] = true, out.Stats
		}
		writeError(w, &contract.Error{
			Code:    contract.CodeInternal,
			Message: "the workflow run failed: " + out.Err.Error(),
			Details: details,
		})
	case out.DryRun:
		writeJSON(w, http.StatusOK, dryRunBody(out))
	default:
		nameRun(w, out)
		writeJSON(w, http.StatusOK, out.Output)
	}
}

func nameRun(w http.ResponseWriter, out workflow.Outcome) {
	w.Header().Set(HeaderWorkflowRunUUID, out.RunUUID)
	w.Header().Set(HeaderWorkflowRunStatus, out.Status)
}

// dryRunBody is a dry run's answer: the output, with "dry_run": true and the stats (its preview).
func dryRunBody(out workflow.Outcome) map[string]any {
	body := make(map[string]any, len(out.Output)+2)
	for k, v := range out.Output {
		body[k] = v
	}
	body["dry_run"], body["stats"] = true, out.Stats
	return body
}

// writeError answers with the error's code, its status, and a message safe to show.
func writeError(w http.ResponseWriter, err error) {
	code := contract.CodeOf(err)
	body := map[string]any{"code": code}
	var ve *contract.ValidationError
	var ce *contract.Error
	switch {
	case errors.As(err, &ve):
		body["message"] = ve.Error()
		body["details"] = map[string]any{"violations": ve.Violations}
	case errors.As(err, &ce):
		body["message"] = ce.Message
		if ce.Details != nil {
			body["details"] = ce.Details
		}
	default:
		body["message"] = "internal error"
	}
	writeJSON(w, code.HTTPStatus(), map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
