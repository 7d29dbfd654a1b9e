// Package message owns stalesweep's messages: the body of a manual start request, the Pub/Sub
// push deliveries its event functions receive, and the messages on its topics — each type, its
// attributes (Attr*), its encoding and its decoding, in one place, so what Dispatch and Sweep
// write is what Sweep and SyncExecution read. Decoders never panic, read a bounded number of
// bytes, and reject bad input with a *contract.ValidationError naming the field and the rule;
// the one plain error is a body that broke off while being read. The fuzz targets
// (fuzz_test.go) hold each decoder to this.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// MaxBodyBytes bounds a start request or a message's data.
const MaxBodyBytes = 1 << 20

// Start asks for one workflow run: the seeds' `POST /api/workflows/start` body, and the data of
// a message on the sweeps topic.
type Start struct {
	WorkflowType contract.WorkflowType `json:"workflow_type"`
	InitialData  json.RawMessage       `json:"initial_data,omitempty"`
	// OverridePause asks the HTTP face to run though the scope is paused
	// (workflow.Request.OverridePause). Sweep ignores it: no message overrides a pause.
	OverridePause bool `json:"override_pause,omitempty"`
}

// DecodeStart reads a Start from r, refusing more than MaxBodyBytes, unknown fields, and
// anything but one JSON object.
func DecodeStart(r io.Reader) (Start, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return Start{}, fmt.Errorf("read request: %w", err)
	}
	return ParseStart(raw)
}

// ParseStart is DecodeStart on bytes already read.
func ParseStart(raw []byte) (Start, error) {
	var s Start
	if err := decodeOne(raw, &s); err != nil {
		return Start{}, err
	}
	return s, s.check()
}

// check holds a decoded Start to its rules.
func (s Start) check() error {
	if s.WorkflowType == "" {
		return contract.Invalid("workflow_type", "required", "is required")
	}
	if !s.WorkflowType.Known() {
		return contract.Invalid("workflow_type", "enum", "unknown workflow type %q", s.WorkflowType)
	}
	if t := bytes.TrimSpace(s.InitialData); len(t) > 0 && t[0] != '{' && !bytes.Equal(t, []byte("null")) {
		return contract.Invalid("initial_data", "type", "must be a JSON object")
	}
	return nil
}

// StartRequest is the body of a manual start request (StartWorkflow). dry_run sits beside
// initial_data because the seeds' initial_data refuse unknown fields; a Start refuses it too, so
// no published message can preview where a run was meant, or run where a preview was.
type StartRequest struct {
	Start
	// DryRun previews the run (workflow.Request.DryRun).
	DryRun bool `json:"dry_run,omitempty"`
	// OverrideStormGuard is read only to be refused (ErrStormGuardOverride), not left an unknown
	// field: only an operator at the command (--override-storm-guard) may override the guard.
	OverrideStormGuard bool `json:"override_storm_guard,omitempty"`
}

// ErrStormGuardOverride is the answer to a start request that asks to override the storm guard.
var ErrStormGuardOverride = contract.Errorf(contract.CodeForbidden,
	"override_storm_guard: no request may override the storm guard; after checking that the workers really are gone, an operator runs the workflow once from the command: stalesweep run WORKFLOW_TYPE --data '{...}' --override-storm-guard")

// DecodeStartRequest reads a StartRequest from r, as DecodeStart reads a Start.
func DecodeStartRequest(r io.Reader) (StartRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return StartRequest{}, fmt.Errorf("read request: %w", err)
	}
	return ParseStartRequest(raw)
}

// ParseStartRequest is DecodeStartRequest on bytes already read.
func ParseStartRequest(raw []byte) (StartRequest, error) {
	var s StartRequest
	if err := decodeOne(raw, &s); err != nil {
		return StartRequest{}, err
	}
	if err := s.check(); err != nil {
		return s, err
	}
	if s.OverrideStormGuard {
		return s, ErrStormGuardOverride
	}
	return s, nil
}

// decodeOne decodes raw into v by DecodeStart's rules.
func decodeOne(raw []byte, v any) error {
	if len(raw) > MaxBodyBytes {
		return contract.Invalid("body", "maxLength", "is larger than %d bytes", MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return contract.Invalid("body", "type", "must hold exactly one JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return contract.Invalid("body", "type", "must hold exactly one JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a validation error naming the field where it can.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return contract.Invalid(field, "type", "must be a %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return contract.Invalid("body", "type", "is not valid JSON: %v (at byte %d)", err, se.Offset)
	case errors.Is(err, io.EOF):
		return contract.Invalid("body", "required", "is empty")
	}
	// encoding/json reports an unknown field only in words: `json: unknown field "NAME"`.
	if quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		switch name, uerr := strconv.Unquote(quoted); {
		case uerr != nil:
		case name == "": // a field needs a name to be named; name where it is instead
			return contract.Invalid("body", "additionalProperties", "has a field with an empty name, which is not a known field")
		default:
			return contract.Invalid(name, "additionalProperties", "is not a known field")
		}
	}
	return contract.Invalid("body", "type", "is not valid JSON: %v", err)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "struct", "map":
		return "object"
	case "slice":
		return "array"
	default:
		return k
	}
}

// PubSub is a Pub/Sub message as Eventarc and push subscriptions deliver it.
type PubSub struct {
	Data        []byte            `json:"data"` // base64 on the wire
	Attributes  map[string]string `json:"attributes"`
	MessageID   string            `json:"messageId"`
	PublishTime time.Time         `json:"publishTime"`
}

// pushBody is the body of a google.cloud.pubsub.topic.v1.messagePublished event, and of a raw
// push request (which adds subscription).
type pushBody struct {
	Message      *PubSub `json:"message"`
	Subscription string  `json:"subscription"`
}

// ParsePubSub reads the message out of a messagePublished event's data or a raw push body.
func ParsePubSub(raw []byte) (PubSub, error) {
	if len(raw) > MaxPushBytes {
		return PubSub{}, contract.Invalid("message", "maxLength", "is larger than %d bytes", MaxPushBytes)
	}
	var b pushBody
	if err := json.Unmarshal(raw, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return PubSub{}, contract.Invalid(te.Field, "type", "has the wrong type: %v", err)
		}
		return PubSub{}, contract.Invalid("message", "type", "is not a Pub/Sub message: %v", err)
	}
	if b.Message == nil {
		return PubSub{}, contract.Invalid("message", "required", "is required")
	}
	if len(b.Message.Data) > MaxBodyBytes {
		return PubSub{}, contract.Invalid("message.data", "maxLength", "is larger than %d bytes", MaxBodyBytes)
	}
	return *b.Message, nil
}
