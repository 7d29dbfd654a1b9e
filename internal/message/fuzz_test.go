package message

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// The fuzz targets below hold every decoder of this package to the package's promise: whatever
// arrives, no panic; a rejection is a *contract.ValidationError whose every violation names a
// field and a rule; and what is accepted survives being encoded again the way stalesweep itself
// encodes it. `go test` runs their seeds; .ci/fuzz runs each for a bounded time.

const (
	fuzzOrg  = "0f8fad5b-d9cb-469f-a165-70867728950e"
	fuzzTrac = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// seedData is message data as the pipeline publishes it, and near misses of it.
var seedData = []string{
	`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"limit": 50}}`,
	`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": "` + fuzzOrg + `"}}`,
	`{"workflow_type": "pm.sweep"}`,
	`{"workflow_type": "pm.sweep", "initial_data": null}`,
	`{"workflow_type": "platform.extension.runs.sweep", "initial_data": {"older_than_ms": 60000}}`,
	`{"workflow_type": "runner.nope"}`,
	`{"workflow_type": 7}`,
	`{"workflow_type": "pm.sweep", "initial_data": [1]}`,
	`{"workflow_type": "pm.sweep"} {}`,
	`{"workflow_type": "pm.sweep", "x": 1}`,
	`{"workflow_run_uuid": "run-1", "organization_uuid": "` + fuzzOrg + `", "runner_execution_uuid": "row-1", "provider": "cloud_run",
	  "provider_ref": {"execution": "projects/p/locations/l/jobs/j/executions/e"}, "observed_at": "2026-11-29T08:00:00Z"}`,
	`{"workflow_run_uuid": "run-1", "organization_uuid": "` + fuzzOrg + `", "runner_execution_uuid": "row-1", "provider": "kubernetes",
	  "provider_ref": {"cluster": "c", "namespace": "n", "job": "j", "uid": "u", "n": 1.5e3}, "observed_at": "2026-11-29T08:00:00.123456789+02:00"}`,
	`{"workflow_run_uuid": "run-1", "organization_uuid": "acme", "runner_execution_uuid": "a/b", "provider": "", "provider_ref": {}, "observed_at": "yesterday"}`,
	`{"workflow_run_uuid": "", "observed_at": "0001-01-01T00:00:00Z"}`,
	``, `null`, `{}`, `[]`, `"x"`, `{"workflow_type"`,
}

// checkRejection fails t unless err is a validation error fit to show a caller.
func checkRejection(t *testing.T, what string, err error) {
	t.Helper()
	var ve *contract.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: rejected with %T %v, want a *contract.ValidationError", what, err, err)
	}
	if len(ve.Violations) == 0 {
		t.Fatalf("%s: a validation error with no violations", what)
	}
	for _, v := range ve.Violations {
		if v.Field == "" || v.Rule == "" {
			t.Fatalf("%s: violation %+v does not name a field and a rule", what, v)
		}
	}
}

// encode marshals v as stalesweep's own publishers do.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func sameMessage(a, b PubSub) bool {
	return bytes.Equal(a.Data, b.Data) && maps.Equal(a.Attributes, b.Attributes) && a.MessageID == b.MessageID &&
		a.PublishTime.Equal(b.PublishTime)
}

// checkPubSub is ParsePubSub's property.
func checkPubSub(t *testing.T, raw []byte) (PubSub, bool) {
	t.Helper()
	msg, err := ParsePubSub(raw)
	if err != nil {
		checkRejection(t, "ParsePubSub", err)
		return PubSub{}, false
	}
	if len(msg.Data) > MaxBodyBytes {
		t.Fatalf("ParsePubSub accepted %d bytes of data, over MaxBodyBytes", len(msg.Data))
	}
	again, err := ParsePubSub(encode(t, pushBody{Message: &msg}))
	if err != nil || !sameMessage(msg, again) {
		t.Fatalf("ParsePubSub: accepted %+v but not its own encoding: %+v, %v", msg, again, err)
	}
	return msg, true
}

func FuzzParsePubSub(f *testing.F) {
	for _, d := range seedData {
		f.Add(rawPush([]byte(d), "1", map[string]string{"trigger": "schedule"}))
	}
	for _, s := range []string{
		`{"message": {"data": "", "messageId": "1"}, "subscription": "s"}`,
		`{"message": {"data": null, "attributes": null, "messageId": "1", "publishTime": "2026-11-29T08:00:00.5-07:00"}}`,
		`{"message": {"data": "e30=", "@type": "type.googleapis.com/google.pubsub.v1.PubsubMessage"}}`,
		`{"message": {"data": "***"}}`, `{"message": {"data": 5}}`, `{"message": {"attributes": [1]}}`,
		`{"message": {"publishTime": "yesterday"}}`, `{"message": null}`, `{"subscription": "s"}`, `{}`, `not json`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkPubSub(t, raw) })
}

// checkStart is ParseStart's property: the tick decoding of Dispatch and the start decoding of
// Sweep and StartWorkflow.
func checkStart(t *testing.T, raw []byte) {
	t.Helper()
	s, err := ParseStart(raw)
	d, derr := DecodeStart(bytes.NewReader(raw))
	if (err == nil) != (derr == nil) || s.WorkflowType != d.WorkflowType || !bytes.Equal(s.InitialData, d.InitialData) {
		t.Fatalf("DecodeStart (%+v, %v) disagrees with ParseStart (%+v, %v)", d, derr, s, err)
	}
	if err != nil {
		checkRejection(t, "ParseStart", err)
		return
	}
	if !s.WorkflowType.Known() {
		t.Fatalf("ParseStart accepted unknown workflow type %q", s.WorkflowType)
	}
	if in := bytes.TrimSpace(s.InitialData); len(in) > 0 && string(in) != "null" && (in[0] != '{' || !json.Valid(in)) {
		t.Fatalf("ParseStart accepted initial_data %s, not an object", in)
	}
	again, err := ParseStart(encode(t, s))
	if err != nil || again.WorkflowType != s.WorkflowType || !sameJSON(again.InitialData, s.InitialData) {
		t.Fatalf("ParseStart accepted %s but not its own encoding: %+v, %v", raw, again, err)
	}
}

// sameJSON compares two JSON texts ignoring insignificant space; absent equals null.
func sameJSON(a, b []byte) bool {
	compact := func(x []byte) string {
		if len(bytes.TrimSpace(x)) == 0 {
			return "null"
		}
		var out bytes.Buffer
		if err := json.Compact(&out, x); err != nil {
			return "invalid:" + string(x)
		}
		return out.String()
	}
	return compact(a) == compact(b)
}

func FuzzParseStart(f *testing.F) {
	for _, d := range seedData {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkStart(t, raw) })
}

// checkSync is ParseSync's property: the sync request decoding of SyncExecution. What it accepts
// is valid, and what the pipeline publishes for it (json.Marshal) reads back the same.
func checkSync(t *testing.T, raw []byte) {
	t.Helper()
	req, err := ParseSync(raw)
	if err != nil {
		checkRejection(t, "ParseSync", err)
		return
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("ParseSync accepted an invalid request: %v", err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatalf("ParseSync accepted %s, which does not encode again: %v", raw, err)
	}
	again, err := ParseSync(b)
	if err != nil || !again.ObservedAt.Equal(req.ObservedAt) {
		t.Fatalf("ParseSync accepted %s but not its own encoding %s: %v", raw, b, err)
	}
	again.ObservedAt = req.ObservedAt
	if !reflect.DeepEqual(again, req) {
		t.Fatalf("ParseSync: %+v came back as %+v", req, again)
	}
}

func FuzzParseSync(f *testing.F) {
	for _, d := range seedData {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSync(t, raw) })
}

// rawPush is a push subscription's body carrying data.
func rawPush(data []byte, id string, attrs map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{
		"subscription": "projects/p/subscriptions/s",
		"message": map[string]any{"data": base64.StdEncoding.EncodeToString(data), "attributes": attrs,
			"messageId": id, "publishTime": "2026-11-29T08:00:00.123Z"},
	})
	return b
}

// deliver builds the request that delivers msg as event id in the given shape, as Eventarc (or
// the Pub/Sub emulator, for ShapeRaw) would send it.
func deliver(t *testing.T, shape Shape, id string, msg PubSub) *http.Request {
	t.Helper()
	body := encode(t, pushBody{Message: &msg, Subscription: "projects/p/subscriptions/s"})
	var r *http.Request
	switch shape {
	case ShapeBinary:
		r = httptest.NewRequest(http.MethodPost, "/Dispatch", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Ce-Specversion", "1.0")
		r.Header.Set("Ce-Id", id)
		r.Header.Set("Ce-Type", MessagePublished)
		r.Header.Set("Ce-Source", "//pubsub.googleapis.com/projects/p/topics/t")
	case ShapeStructured:
		event := encode(t, map[string]any{"specversion": "1.0", "id": id, "type": MessagePublished,
			"source": "//pubsub.googleapis.com/projects/p/topics/t", "datacontenttype": "application/json",
			"data": json.RawMessage(body)})
		r = httptest.NewRequest(http.MethodPost, "/Dispatch", bytes.NewReader(event))
		r.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	default:
		r = httptest.NewRequest(http.MethodPost, "/Dispatch", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// checkPush is DecodePush's property, followed by what the event functions do with the message.
func checkPush(t *testing.T, r *http.Request) {
	t.Helper()
	p, err := DecodePush(r)
	if err != nil {
		checkRejection(t, "DecodePush", err) // the body never fails to read here
		return
	}
	switch {
	case p.EventID == "" || len(p.EventID) > MaxIDBytes:
		t.Fatalf("DecodePush accepted event id %q", clip(p.EventID))
	case p.Message.MessageID == "" || len(p.Message.MessageID) > MaxIDBytes:
		t.Fatalf("DecodePush accepted message id %q", clip(p.Message.MessageID))
	case len(p.Message.Data) > MaxBodyBytes:
		t.Fatalf("DecodePush accepted %d bytes of data", len(p.Message.Data))
	case p.EventType != MessagePublished:
		t.Fatalf("DecodePush accepted event type %q", clip(p.EventType))
	case len(p.Traceparent) > maxTraceparentBytes:
		t.Fatalf("DecodePush kept a %d-byte traceparent", len(p.Traceparent))
	}
	// The same message delivered again, in any shape, decodes to the same message.
	for _, shape := range []Shape{ShapeBinary, ShapeStructured, ShapeRaw} {
		again, err := DecodePush(deliver(t, shape, p.EventID, p.Message))
		if err != nil || !sameMessage(again.Message, p.Message) || again.Shape != shape {
			t.Fatalf("DecodePush accepted %+v but not its redelivery as %s: %+v, %v", p, shape, again, err)
		}
	}
	checkStart(t, p.Message.Data)
	checkSync(t, p.Message.Data)
}

func FuzzDecodePush(f *testing.F) {
	push := rawPush([]byte(seedData[0]), "42", map[string]string{"trigger": "schedule"})
	event := func(data string) []byte {
		return []byte(`{"specversion": "1.0", "id": "42", "type": "` + MessagePublished + `", "source": "//pubsub.googleapis.com/projects/p/topics/t",
		  "traceparent": "` + fuzzTrac + `", "data": ` + data + `}`)
	}
	const ce = "application/cloudevents+json"
	for _, s := range []struct {
		contentType, specVersion, id, typ, traceparent string
		body                                           []byte
	}{
		{"application/json", "1.0", "42", MessagePublished, fuzzTrac, push},
		{"application/json", "1.0", "42", MessagePublished, "", []byte(`{"subscription": "s"}`)},
		{"application/json", "0.3", "42", MessagePublished, "", push},
		{"application/json", "1.0", "", MessagePublished, "", push},
		{"application/json", "1.0", "42", "google.cloud.storage.object.v1.finalized", "", push},
		{"", "1.0", "42", MessagePublished, strings.Repeat("0", 300), push},
		{ce, "", "", "", "", event(string(push))},
		{ce + "; charset=utf-8", "", "", "", "", event(string(push))},
		{ce, "", "", "", "", event(`null`)},
		{ce, "", "", "", "", event(`"eyJtZXNzYWdlIjp7fX0="`)},
		{ce, "", "", "", "", []byte(`{"specversion": "1.0", "id": 42}`)},
		{ce, "", "", "", "", []byte(`[]`)},
		{"application/json", "", "", "", fuzzTrac, push},
		{"application/json", "", "", "", "", rawPush([]byte(seedData[10]), "", nil)},
		{"application/json", "", "", "", "", rawPush([]byte("not json"), "7", nil)},
		{"application/json", "", "", "", "", []byte(`{"message": {"data": "***", "messageId": "1"}}`)},
		{"text/plain", "", "", "", "", []byte(`not json`)},
		{"", "", "", "", "", nil},
	} {
		f.Add(s.contentType, s.specVersion, s.id, s.typ, s.traceparent, s.body)
	}
	f.Fuzz(func(t *testing.T, contentType, specVersion, id, typ, traceparent string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/Dispatch", bytes.NewReader(body))
		for k, v := range map[string]string{"Content-Type": contentType, "Ce-Specversion": specVersion, "Ce-Id": id,
			"Ce-Type": typ, "Traceparent": traceparent} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		checkPush(t, r)
	})
}

// FuzzPushData fuzzes what the event functions decode out of a well-formed delivery: any data
// within the limit must come through every shape byte for byte, and then decode (or be
// rejected) as a tick, a sweep message or a sync message.
func FuzzPushData(f *testing.F) {
	for _, d := range seedData {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := PubSub{Data: data, Attributes: map[string]string{"trigger": "manual"}, MessageID: "42",
			PublishTime: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
		for _, shape := range []Shape{ShapeBinary, ShapeStructured, ShapeRaw} {
			p, err := DecodePush(deliver(t, shape, "42", msg))
			if len(data) > MaxBodyBytes {
				checkRejection(t, "DecodePush", err)
				continue
			}
			if err != nil || !bytes.Equal(p.Message.Data, data) {
				t.Fatalf("a well-formed %s delivery of %q: %v", shape, data, err)
			}
		}
		checkStart(t, data)
		checkSync(t, data)
	})
}
