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

// StartWorkflow runs one workflow run for a manual caller and answers with its output.
func StartWorkflow(w http.ResponseWriter, r *http.Request) {
	a, err := deps.Get(r.Context())
	if err != nil {
		logger().Error("dependencies unavailable", "error", err.Error())
		writeError(w, contract.Errorf(contract.CodeInternal, "the service is not ready; retry shortly"))
		return
	}
	log := logger().With(attrs(logging.TraceAttrs(r, a.Config.Project))...)
	if r.Method != http.MethodPost {
		writeError(w, contract.Invalid("method", "enum", "%s is not allowed; use POST", r.Method))
		return
	}
	start, err := message.DecodeStart(http.MaxBytesReader(w, r.Body, message.MaxBodyBytes+1))
	if err != nil {
		log.Warn("start request refused", "error", err.Error())
		writeError(w, err)
		return
	}
	out, err := a.Engine.Start(r.Context(), workflow.Request{
		Type:        start.WorkflowType,
		InitialData: start.InitialData,
		Trigger:     workflow.TriggerManual,
	})
	switch {
	case err != nil:
		if contract.CodeOf(err) == contract.CodeInternal {
			log.Error("workflow run could not start", "workflow_type", string(start.WorkflowType), "error", err.Error())
		}
		writeError(w, err)
	case out.Status == workflow.StateFailed:
		writeError(w, &contract.Error{
			Code:    contract.CodeInternal,
			Message: "the workflow run failed: " + out.Err.Error(),
			Details: map[string]any{"workflow_run_uuid": out.RunUUID, "output": out.Output},
		})
	default:
		writeJSON(w, http.StatusOK, out.Output)
	}
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
