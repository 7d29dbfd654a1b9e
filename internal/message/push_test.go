package message

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
)

var tick = []byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run"}`)

func TestDecodePushReadsEachShapeToTheSameMessage(t *testing.T) {
	want := PubSub{Data: tick, Attributes: map[string]string{"trigger": "manual", "actor": "ops@example.com"}, MessageID: "42",
		PublishTime: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	for _, shape := range []Shape{ShapeBinary, ShapeStructured, ShapeRaw} {
		t.Run(string(shape), func(t *testing.T) {
			r := deliver(t, shape, "42", want)
			r.Header.Set("Traceparent", fuzzTrac)
			p, err := DecodePush(r)
			if err != nil {
				t.Fatal(err)
			}
			if !sameMessage(p.Message, want) || p.EventID != "42" || p.EventType != MessagePublished || p.Shape != shape || p.Traceparent != fuzzTrac {
				t.Errorf("decoded %+v, want message %+v from event 42", p, want)
			}
		})
	}
}

func TestDecodePushTakesTheEventIDWhenTheMessageHasNone(t *testing.T) {
	for _, shape := range []Shape{ShapeBinary, ShapeStructured} {
		p, err := DecodePush(deliver(t, shape, "ce-7", PubSub{Data: tick}))
		if err != nil || p.Message.MessageID != "ce-7" || p.EventID != "ce-7" {
			t.Errorf("%s: message id %q event id %q (%v), want ce-7 for both", shape, p.Message.MessageID, p.EventID, err)
		}
	}
}

func TestDecodePushPrefersTheCloudEventTraceparent(t *testing.T) {
	r := deliver(t, ShapeBinary, "1", PubSub{Data: tick, MessageID: "1"})
	r.Header.Set("Traceparent", "00-11111111111111111111111111111111-1111111111111111-01")
	r.Header.Set("Ce-Traceparent", fuzzTrac)
	if p, err := DecodePush(r); err != nil || p.Traceparent != fuzzTrac {
		t.Errorf("traceparent %q (%v), want the ce-traceparent %s", p.Traceparent, err, fuzzTrac)
	}
	r = deliver(t, ShapeRaw, "1", PubSub{Data: tick, MessageID: "1"})
	r.Header.Set("Traceparent", strings.Repeat("0", maxTraceparentBytes+1))
	if p, err := DecodePush(r); err != nil || p.Traceparent != "" {
		t.Errorf("an oversized traceparent was kept (%d bytes, %v)", len(p.Traceparent), err)
	}
}

func TestDecodePushRejections(t *testing.T) {
	msg := PubSub{Data: tick, MessageID: "42"}
	binary := func(mod func(h http.Header)) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := deliver(t, ShapeBinary, "42", msg)
			mod(r.Header)
			return r
		}
	}
	body := func(contentType, body string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/Sweep", strings.NewReader(body))
			r.Header.Set("Content-Type", contentType)
			return r
		}
	}
	const ce = "application/cloudevents+json"
	structured := func(attrs, data string) string {
		return `{"specversion": "1.0", "id": "1", "source": "s", "type": "` + MessagePublished + `"` + attrs + `, "data": ` + data + `}`
	}
	tests := []struct {
		name        string
		req         func(t *testing.T) *http.Request
		field, rule string
	}{
		{"binary: another spec version", binary(func(h http.Header) { h.Set("Ce-Specversion", "0.3") }), "ce-specversion", "const"},
		{"binary: no id", binary(func(h http.Header) { h.Del("Ce-Id") }), "ce-id", "required"},
		{"binary: an id with a newline", binary(func(h http.Header) { h.Set("Ce-Id", "4\n2") }), "ce-id", "format"},
		{"binary: an id not UTF-8", binary(func(h http.Header) { h.Set("Ce-Id", "\xff") }), "ce-id", "format"},
		{"binary: an overlong id", binary(func(h http.Header) { h.Set("Ce-Id", strings.Repeat("9", MaxIDBytes+1)) }), "ce-id", "maxLength"},
		{"binary: another event type", binary(func(h http.Header) { h.Set("Ce-Type", "google.cloud.storage.object.v1.finalized") }), "ce-type", "const"},
		{"binary: no message", body("application/json", `{"subscription": "s"}`), "message", "required"},
		{"structured: no data", body(ce, structured("", "null")), "data", "required"},
		{"structured: data not a push body", body(ce, structured("", `"x"`)), "data.message", "type"},
		{"structured: data without a message", body(ce, structured("", `{"subscription": "s"}`)), "data.message", "required"},
		{"structured: data not base64", body(ce, structured("", `{"message": {"data": "***"}}`)), "data.message", "type"},
		{"structured: another event type", body(ce, `{"specversion": "1.0", "id": "1", "type": "x", "data": {}}`), "type", "const"},
		{"structured: an id not a string", body(ce, `{"specversion": "1.0", "id": 1}`), "id", "type"},
		{"structured: no spec version", body(ce, `{"id": "1"}`), "specversion", "const"},
		{"structured: not an object", body(ce+"; charset=utf-8", `[]`), "body", "type"},
		{"raw: no message id", body("application/json", `{"message": {"data": "e30="}}`), "message.messageId", "required"},
		{"raw: a message id with a NUL", body("application/json", `{"message": {"data": "e30=", "messageId": "4\u00002"}}`), "message.messageId", "format"},
		{"raw: not JSON", body("application/json", `not json`), "message", "type"},
		{"raw: empty", body("", ``), "message", "type"},
		{"raw: data over the limit", body("application/json", `{"message": {"messageId": "1", "data": "`+
			strings.Repeat("QUFB", MaxBodyBytes/3+1)+`"}}`), "message.data", "maxLength"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodePush(tt.req(t))
			checkRejection(t, tt.name, err)
			if v := violation(t, err); v.Field != tt.field || v.Rule != tt.rule {
				t.Errorf("violation = %+v, want %s/%s", v, tt.field, tt.rule)
			}
		})
	}
}

// countingBody serves n bytes of a push-like body without holding them, counting what is read.
type countingBody struct {
	n, read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	if c.read >= c.n {
		return 0, io.EOF
	}
	k := min(len(p), c.n-c.read)
	for i := range p[:k] {
		p[i] = 'A'
	}
	c.read += k
	return k, nil
}

func (c *countingBody) Close() error { return nil }

func TestDecodePushRefusesAnOversizedBodyWithoutReadingItWhole(t *testing.T) {
	t.Run("streamed", func(t *testing.T) {
		body := &countingBody{n: 16 * MaxPushBytes}
		r := httptest.NewRequest(http.MethodPost, "/Dispatch", body)
		r.ContentLength = -1 // chunked: only reading tells the size
		_, err := DecodePush(r)
		if v := violation(t, err); v.Field != "body" || v.Rule != "maxLength" || !strings.Contains(v.Message, strconv.Itoa(MaxPushBytes)) {
			t.Errorf("violation = %+v, want body/maxLength naming the %d-byte limit", v, MaxPushBytes)
		}
		if body.read > MaxPushBytes+1 {
			t.Errorf("read %d bytes of a %d-byte body, want at most %d", body.read, body.n, MaxPushBytes+1)
		}
	})
	t.Run("declared", func(t *testing.T) {
		body := &countingBody{n: MaxPushBytes + 1}
		r := httptest.NewRequest(http.MethodPost, "/Dispatch", body)
		r.ContentLength = int64(body.n)
		_, err := DecodePush(r)
		if v := violation(t, err); v.Field != "body" || v.Rule != "maxLength" {
			t.Errorf("violation = %+v, want body/maxLength", v)
		}
		if body.read != 0 {
			t.Errorf("read %d bytes of a body whose Content-Length already said it was too large", body.read)
		}
	})
	t.Run("just within", func(t *testing.T) {
		pad := MaxPushBytes - len(rawPush(tick, "1", nil)) - len(`,"padding":""`)
		r := httptest.NewRequest(http.MethodPost, "/Dispatch",
			bytes.NewReader(append(bytes.TrimSuffix(rawPush(tick, "1", nil), []byte("}")), []byte(`,"padding":"`+strings.Repeat("x", pad)+`"}`)...)))
		if r.ContentLength != MaxPushBytes {
			t.Fatalf("built a %d-byte body, want exactly %d", r.ContentLength, MaxPushBytes)
		}
		if _, err := DecodePush(r); err != nil {
			t.Errorf("a body of exactly MaxPushBytes was refused: %v", err)
		}
	})
}

type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (failingBody) Close() error             { return nil }

// A body that breaks off is not the sender's mistake to acknowledge: it is a plain error, so the
// event targets answer 500 and the message comes again.
func TestDecodePushReportsABrokenBodyAsAPlainError(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/Dispatch", failingBody{})
	r.Header.Set("Ce-Id", "1")
	p, err := DecodePush(r)
	var ve *contract.ValidationError
	if err == nil || errors.As(err, &ve) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want a plain error wrapping the read failure", err)
	}
	if p.EventID != "1" {
		t.Errorf("the event id %q was not kept for the log", p.EventID)
	}
}

func TestParseSync(t *testing.T) {
	valid := `{"workflow_run_uuid": "run-1", "organization_uuid": "` + fuzzOrg + `", "runner_execution_uuid": "row-1",
	  "provider": "cloud_run", "provider_ref": {"execution": "projects/p/locations/l/jobs/j/executions/e"}, "observed_at": "2026-11-29T08:00:00Z"}`
	req, err := ParseSync([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if req.RunnerExecutionUUID != "row-1" || req.ProviderRef["execution"] != "projects/p/locations/l/jobs/j/executions/e" || req.ObservedAt.IsZero() {
		t.Errorf("parsed %+v", req)
	}
	tests := []struct {
		name, body, field, rule string
		decoded                 bool // refused by Validate, so returned for the log
	}{
		{"empty", ``, "body", "required", false},
		{"an array", `[1]`, "body", "type", false},
		{"unknown field", strings.Replace(valid, `"provider"`, `"extra": true, "provider"`, 1), "extra", "additionalProperties", false},
		{"two objects", valid + ` {}`, "body", "type", false},
		{"provider_ref a string", strings.Replace(valid, `{"execution": "projects/p/locations/l/jobs/j/executions/e"}`, `"e"`, 1), "provider_ref", "type", false},
		{"no run", strings.Replace(valid, `"run-1"`, `""`, 1), "workflow_run_uuid", "required", true},
		{"organization not a uuid", strings.Replace(valid, fuzzOrg, "acme", 1), "organization_uuid", "format", true},
		{"row id a path", strings.Replace(valid, `"row-1"`, `"../x"`, 1), "runner_execution_uuid", "format", true},
		{"row id reserved by Firestore", strings.Replace(valid, `"row-1"`, `"__x__"`, 1), "runner_execution_uuid", "format", true},
		{"run id reserved by Firestore", strings.Replace(valid, `"run-1"`, `".."`, 1), "workflow_run_uuid", "format", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSync([]byte(tt.body))
			if v := violation(t, err); v.Field != tt.field || v.Rule != tt.rule {
				t.Errorf("violation = %+v, want %s/%s", v, tt.field, tt.rule)
			}
			if tt.decoded && got.Provider != "cloud_run" {
				t.Errorf("a request refused by Validate was not returned for the log: %+v", got)
			}
		})
	}
}
