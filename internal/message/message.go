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

	"github.com/google/uuid"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
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

// The attributes stalesweep's own messages carry. A tick's are the publisher's (Cloud
// Scheduler's, or an operator's): only AttrTrigger and AttrActor are read from it, and the
// actor only as a claim.
const (
	AttrTrigger             = "trigger"               // schedule | manual
	AttrActor               = "actor"                 // who asked, where known (a claim)
	AttrWorkflowRunUUID     = "workflow_run_uuid"     // the run a sweep or sync message belongs to
	AttrTickID              = "tick_id"               // the tick a sweep message came from
	AttrWorkflowType        = "workflow_type"         // for filtering and logs
	AttrRunnerExecutionUUID = "runner_execution_uuid" // on sync messages
	AttrDispatchAfter       = "dispatch_after"        // on a tick's continuation: the organization to resume after
	AttrRoster              = "roster"                // on a tick's continuation: "build" while the tick builds the roster
)

// Outgoing is one message to publish: its data and attributes.
type Outgoing struct {
	Data       []byte
	Attributes map[string]string
}

// SweepAttributes are a sweep message's attributes.
type SweepAttributes struct {
	Trigger         string // schedule | manual
	ClaimedActor    string // who the tick says sent it; unverified, omitted when empty
	WorkflowRunUUID string // the run the message starts
	TickID          string // the tick it came from
}

// EncodeSweep is the message on the sweeps topic that starts one run: s as its data (what
// ParseStart reads back), and its attributes.
func EncodeSweep(s Start, a SweepAttributes) (Outgoing, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return Outgoing{}, fmt.Errorf("encode sweep message: %w", err)
	}
	attrs := map[string]string{
		AttrTrigger:         a.Trigger,
		AttrWorkflowType:    string(s.WorkflowType),
		AttrWorkflowRunUUID: a.WorkflowRunUUID,
		AttrTickID:          a.TickID,
	}
	if a.ClaimedActor != "" {
		attrs[AttrActor] = a.ClaimedActor
	}
	return Outgoing{Data: data, Attributes: attrs}, nil
}

// ContinuationAttributes are a tick continuation's attributes.
type ContinuationAttributes struct {
	Trigger      string // the tick's
	ClaimedActor string // the tick's claim, omitted when empty
	TickID       string // the tick's own id: the runs are named after it
	After        string // the organization the dispatch resumes after
	Roster       string // RosterBuild while the tick builds the roster of organizations; else empty
}

// RosterBuild is AttrRoster's value on the continuations of a tick that is building the roster.
const RosterBuild = "build"

// EncodeContinuation is the message on the ticks topic that hands the rest of a tick to the next
// Dispatch invocation: the tick's data, with where to resume in its attributes (Continuation).
func EncodeContinuation(s Start, a ContinuationAttributes) (Outgoing, error) {
	if a.TickID == "" || a.After == "" {
		return Outgoing{}, fmt.Errorf("encode tick continuation: the tick id and where to resume are required")
	}
	data, err := json.Marshal(s)
	if err != nil {
		return Outgoing{}, fmt.Errorf("encode tick continuation: %w", err)
	}
	attrs := map[string]string{AttrTrigger: a.Trigger, AttrWorkflowType: string(s.WorkflowType), AttrTickID: a.TickID, AttrDispatchAfter: a.After}
	if a.ClaimedActor != "" {
		attrs[AttrActor] = a.ClaimedActor
	}
	if a.Roster != "" {
		attrs[AttrRoster] = a.Roster
	}
	return Outgoing{Data: data, Attributes: attrs}, nil
}

// Resume is where a tick message has Dispatch start.
type Resume struct {
	TickID string
	After  string
	Roster string
}

// Continuation reads a tick message's attributes: a continuation's tick id, resume point and
// roster attribute, or for a first delivery messageID alone. A continuation without its tick's
// id, or with a roster attribute other than RosterBuild, is malformed.
func Continuation(attrs map[string]string, messageID string) (Resume, error) {
	after := attrs[AttrDispatchAfter]
	if after == "" {
		return Resume{TickID: messageID}, nil
	}
	if attrs[AttrTickID] == "" {
		return Resume{}, fmt.Errorf("a tick continuation (%s=%q) without %s", AttrDispatchAfter, after, AttrTickID)
	}
	if r := attrs[AttrRoster]; r != "" && r != RosterBuild {
		return Resume{}, fmt.Errorf("a tick continuation with %s=%q (want %q or none)", AttrRoster, r, RosterBuild)
	}
	return Resume{TickID: attrs[AttrTickID], After: after, Roster: attrs[AttrRoster]}, nil
}

// EncodeSync is the message on the syncs topic that asks for one row's sync: s as its data
// (what ParseSync reads back), its run and row as attributes.
func EncodeSync(s Sync) Outgoing {
	data, _ := json.Marshal(s) // a Sync always encodes: strings, a time, a map decoded from JSON
	return Outgoing{Data: data, Attributes: map[string]string{
		AttrWorkflowRunUUID:     s.WorkflowRunUUID,
		AttrRunnerExecutionUUID: s.RunnerExecutionUUID,
	}}
}

// Sync is a message on the syncs topic, and the request for one row's sync on every path: it
// carries what the scan saw, so the sync can tell whether the row moved in between.
type Sync struct {
	WorkflowRunUUID     string         `json:"workflow_run_uuid"`
	OrganizationUUID    string         `json:"organization_uuid"`
	RunnerExecutionUUID string         `json:"runner_execution_uuid"`
	Provider            string         `json:"provider"`
	ProviderRef         map[string]any `json:"provider_ref"`
	ObservedAt          time.Time      `json:"observed_at"`
	// IncludeDisabled: workflow.Request.IncludeDisabled. Never on the wire.
	IncludeDisabled bool `json:"-"`
	// OverridePause: workflow.Request.OverridePause, for a run's inline syncs. Never on the
	// wire, so no message overrides a pause.
	OverridePause bool `json:"-"`
}

// Validate checks a sync request that came from outside the process, naming the field and rule.
func (r Sync) Validate() error {
	switch {
	case r.WorkflowRunUUID == "":
		return contract.Invalid("workflow_run_uuid", "required", "is required")
	case firestoreconn.CheckDocID(r.WorkflowRunUUID) != nil:
		return contract.Invalid("workflow_run_uuid", "format", "must be a document id: it %v", firestoreconn.CheckDocID(r.WorkflowRunUUID))
	case uuid.Validate(r.OrganizationUUID) != nil:
		return contract.Invalid("organization_uuid", "format", "must be a UUID")
	case r.RunnerExecutionUUID == "":
		return contract.Invalid("runner_execution_uuid", "required", "is required")
	case firestoreconn.CheckDocID(r.RunnerExecutionUUID) != nil:
		return contract.Invalid("runner_execution_uuid", "format", "must be a document id: it %v", firestoreconn.CheckDocID(r.RunnerExecutionUUID))
	case r.Provider == "":
		return contract.Invalid("provider", "required", "is required")
	case len(r.ProviderRef) == 0:
		return contract.Invalid("provider_ref", "required", "is required")
	case r.ObservedAt.IsZero():
		return contract.Invalid("observed_at", "required", "is required")
	}
	return nil
}

// ParseSync reads the data of a message on the syncs topic by DecodeStart's rules, and validates
// it: Sweep alone writes the topic, but it is still outside input. On a rejection the request holds
// whatever was decoded, so the log can name the row.
func ParseSync(raw []byte) (Sync, error) {
	var req Sync
	if err := decodeOne(raw, &req); err != nil {
		return req, err
	}
	return req, req.Validate()
}
