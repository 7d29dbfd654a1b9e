package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// MaxPushBytes bounds the body of one push delivery: MaxBodyBytes of data grown a third by
// base64, up to 128 KiB of attributes, and the envelope, with room.
const MaxPushBytes = 2 * MaxBodyBytes

// MaxIDBytes bounds an event or message id: an id is logged and names the runs a tick starts, so
// a longer one is refused rather than carried.
const MaxIDBytes = 1024

// maxTraceparentBytes bounds a traceparent kept for the logs (a W3C one is 55 bytes); longer is dropped.
const maxTraceparentBytes = 256

// MessagePublished is the only CloudEvent type an Eventarc Pub/Sub trigger delivers.
const MessagePublished = "google.cloud.pubsub.topic.v1.messagePublished"

// Shape is how a push delivery arrived.
type Shape string

// The three shapes of a Pub/Sub push.
const (
	// ShapeBinary is a binary-mode CloudEvent, as Eventarc delivers: the attributes in ce-* headers.
	ShapeBinary Shape = "binary"
	// ShapeStructured is a structured-mode CloudEvent (application/cloudevents+json).
	ShapeStructured Shape = "structured"
	// ShapeRaw is a push subscription's own request, no CloudEvent, as the Pub/Sub emulator delivers.
	ShapeRaw Shape = "push"
)

// Push is one Pub/Sub message delivered by push, and what the delivery said about it.
type Push struct {
	Message     PubSub
	EventID     string // the CloudEvent id, or the message id of a raw push
	EventType   string // the CloudEvent type; MessagePublished for a raw push
	Traceparent string // W3C trace context for the logs, when one came
	Shape       Shape
}

// DecodePush reads one push delivery in any shape, refusing one without an id, which is what makes a
// redelivery recognisable. On an error the Push holds what could be read (ids, trace) for the log.
func DecodePush(r *http.Request) (Push, error) {
	p := Push{Shape: shapeOf(r.Header)}
	if p.Shape == ShapeBinary {
		p.EventID, p.EventType = r.Header.Get("Ce-Id"), r.Header.Get("Ce-Type")
		p.Traceparent = traceparent(r.Header.Get("Ce-Traceparent"), r.Header.Get("Traceparent"))
	} else {
		p.Traceparent = traceparent(r.Header.Get("Traceparent"))
	}
	raw, err := readPush(r)
	if err != nil {
		return p, err
	}
	switch p.Shape {
	case ShapeBinary:
		err = p.binary(r.Header, raw)
	case ShapeStructured:
		err = p.structured(raw)
	default:
		err = p.raw(raw)
	}
	if err != nil {
		return p, err
	}
	if p.Message.MessageID == "" {
		p.Message.MessageID = p.EventID
	}
	if err := checkID("message.messageId", p.Message.MessageID); err != nil {
		return p, err
	}
	return p, nil
}

// checkID refuses an id that is empty, too long, or not UTF-8 without control characters: JSON would
// re-encode invalid UTF-8 as U+FFFD, so such an id would change between a delivery and its message.
func checkID(field, id string) error {
	switch {
	case id == "":
		return contract.Invalid(field, "required", "is required")
	case len(id) > MaxIDBytes:
		return contract.Invalid(field, "maxLength", "is longer than %d bytes", MaxIDBytes)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return contract.Invalid(field, "format", "must be UTF-8 text without control characters")
	}
	return nil
}

// shapeOf tells the shapes apart as the CloudEvents HTTP binding does: by media type, then ce-* headers.
func shapeOf(h http.Header) Shape {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && mt == "application/cloudevents+json" {
		return ShapeStructured
	}
	if h.Get("Ce-Specversion") != "" || h.Get("Ce-Id") != "" || h.Get("Ce-Type") != "" {
		return ShapeBinary
	}
	return ShapeRaw
}

func traceparent(values ...string) string {
	for _, v := range values {
		if v != "" && len(v) <= maxTraceparentBytes {
			return v
		}
	}
	return ""
}

// readPush reads the body, refusing one larger than MaxPushBytes without reading it whole.
func readPush(r *http.Request) ([]byte, error) {
	tooLarge := contract.Invalid("body", "maxLength", "is larger than the %d-byte limit of a push delivery", MaxPushBytes)
	if r.ContentLength > MaxPushBytes {
		return nil, tooLarge
	}
	if r.Body == nil {
		return nil, contract.Invalid("body", "required", "is empty")
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxPushBytes+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, fmt.Errorf("read push body: %w", err)
	case len(raw) > MaxPushBytes:
		return nil, tooLarge
	}
	return raw, nil
}

func (p *Push) binary(h http.Header, raw []byte) error {
	if err := checkAttributes("ce-", h.Get("Ce-Specversion"), p.EventID, p.EventType); err != nil {
		return err
	}
	msg, err := ParsePubSub(raw)
	if err != nil {
		return err
	}
	p.Message = msg
	return nil
}

type structuredEvent struct {
	SpecVersion string          `json:"specversion"`
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Traceparent string          `json:"traceparent"`
	Data        json.RawMessage `json:"data"`
}

func (p *Push) structured(raw []byte) error {
	var e structuredEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return contract.Invalid(te.Field, "type", "must be a %s", jsonKind(te.Type.Kind().String()))
		}
		return contract.Invalid("body", "type", "is not a structured CloudEvent: %v", err)
	}
	p.EventID, p.EventType = e.ID, e.Type
	if tp := traceparent(e.Traceparent); tp != "" {
		p.Traceparent = tp
	}
	if err := checkAttributes("", e.SpecVersion, e.ID, e.Type); err != nil {
		return err
	}
	if len(e.Data) == 0 || string(e.Data) == "null" {
		return contract.Invalid("data", "required", "is required")
	}
	msg, err := ParsePubSub(e.Data)
	if err != nil {
		return within("data", err)
	}
	p.Message = msg
	return nil
}

// raw reads a push subscription's own body, whose message id is the event's id.
func (p *Push) raw(raw []byte) error {
	msg, err := ParsePubSub(raw)
	if err != nil {
		return err
	}
	if err := checkID("message.messageId", msg.MessageID); err != nil {
		return err
	}
	p.Message, p.EventID, p.EventType = msg, msg.MessageID, MessagePublished
	return nil
}

// checkAttributes holds a CloudEvent to what an Eventarc Pub/Sub trigger sends; prefix is "ce-" for headers.
func checkAttributes(prefix, specVersion, id, typ string) error {
	if specVersion != "1.0" {
		return contract.Invalid(prefix+"specversion", "const", "must be 1.0, not %q", clip(specVersion))
	}
	if err := checkID(prefix+"id", id); err != nil {
		return err
	}
	if typ != MessagePublished {
		return contract.Invalid(prefix+"type", "const", "must be %s, not %q", MessagePublished, clip(typ))
	}
	return nil
}

func within(parent string, err error) error {
	var ve *contract.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &contract.ValidationError{Violations: make([]contract.Violation, len(ve.Violations))}
	for i, v := range ve.Violations {
		v.Field = parent + "." + v.Field
		out.Violations[i] = v
	}
	return out
}

// clip shortens a value quoted back in a message, which may be anything a caller sent.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
