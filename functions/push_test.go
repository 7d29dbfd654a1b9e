package functions

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// hugeBody serves a JSON prefix and then filler, n bytes in all, without holding them, and
// counts what the handler read.
type hugeBody struct {
	prefix  string
	n, read int
}

func (b *hugeBody) Read(p []byte) (int, error) {
	if b.read >= b.n {
		return 0, io.EOF
	}
	k := min(len(p), b.n-b.read)
	for i := range p[:k] {
		if at := b.read + i; at < len(b.prefix) {
			p[i] = b.prefix[at]
		} else {
			p[i] = 'a'
		}
	}
	b.read += k
	return k, nil
}

func (b *hugeBody) Close() error { return nil }

// slack is what a handler may read past its limit: the one byte that tells "too large".
const slack = 1

func TestStartWorkflowRefusesAnOversizedBodyWithoutReadingIt(t *testing.T) {
	testenv.Need(t, testenv.FirestoreEmulator) // StartWorkflow builds its dependencies first
	body := &hugeBody{prefix: `{"workflow_type": "`, n: 64 * message.MaxBodyBytes}
	r := httptest.NewRequest(http.MethodPost, "/StartWorkflow", body)
	r.ContentLength = -1
	for k, v := range bearer(t) {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	StartWorkflow(rec, r)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	code, _, details := errorOf(out)
	vs, _ := details["violations"].([]any)
	if rec.Code != http.StatusBadRequest || code != "validation_failed" || len(vs) == 0 || vs[0].(map[string]any)["field"] != "body" {
		t.Errorf("status %d %s, want 400 validation_failed naming body", rec.Code, rec.Body)
	}
	if body.read > message.MaxBodyBytes+slack {
		t.Errorf("read %d bytes of a %d-byte body, want at most %d", body.read, body.n, message.MaxBodyBytes+slack)
	}
}

func TestEventTargetsAcknowledgeAnOversizedDeliveryWithoutReadingIt(t *testing.T) {
	for name, target := range map[string]http.HandlerFunc{"Dispatch": Dispatch, "Sweep": Sweep, "SyncExecution": SyncExecution} {
		t.Run(name, func(t *testing.T) {
			body := &hugeBody{prefix: `{"message": {"messageId": "1", "data": "`, n: 64 * message.MaxPushBytes}
			r := httptest.NewRequest(http.MethodPost, "/"+name, body)
			r.ContentLength = -1 // chunked: only reading tells the size
			for k, v := range ceHeaders("oversized-" + name) {
				r.Header[k] = v
			}
			rec := httptest.NewRecorder()
			target(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("status %d, want 200: a redelivery would be just as large", rec.Code)
			}
			if body.read > message.MaxPushBytes+slack {
				t.Errorf("read %d bytes of a %d-byte body, want at most %d", body.read, body.n, message.MaxPushBytes+slack)
			}
		})
	}
}

// Over the wire: a delivery whose Content-Length is over the limit is answered before a byte of
// its body is sent. A handler that read the body would wait for it until the deadline.
func TestAnOversizedDeliveryIsAnsweredBeforeItsBodyIsSent(t *testing.T) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /Dispatch HTTP/1.1\r\nHost: functions\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		100*message.MaxPushBytes)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body was withheld: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200 (acknowledged)", resp.StatusCode)
	}
}

func TestEventTargetsAcceptOnlyPost(t *testing.T) {
	for _, target := range []string{"Dispatch", "Sweep", "SyncExecution"} {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			req, _ := http.NewRequest(method, baseURL+"/"+target, strings.NewReader(string(pushBody([]byte(tickData), nil, "1"))))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s %s: status %d Allow %q, want 405 and Allow: POST", method, target, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
}

type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (brokenBody) Close() error             { return nil }

// A body that breaks off never arrived: answering 500 lets the message come again whole.
func TestADeliveryThatBreaksOffIsNotAcknowledged(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/Dispatch", brokenBody{})
	for k, v := range ceHeaders("broken") {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	Dispatch(rec, r)
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", rec.Code)
	}
}

// Eventarc sends binary-mode CloudEvents, but a structured one carries the same message and must
// be handled the same way.
func TestAStructuredCloudEventSyncsARow(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t, w.org, kindSucceeded)
	row := w.row(t, id)
	w.sweepRun(t, "run-structured-"+id, w.org, id)
	data, _ := json.Marshal(message.Sync{
		WorkflowRunUUID: "run-structured-" + id, OrganizationUUID: w.org, RunnerExecutionUUID: id,
		Provider: "cloud_run", ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt,
	})
	event, _ := json.Marshal(map[string]any{
		"specversion": "1.0", "id": "structured-" + id, "type": message.MessagePublished,
		"source": "//pubsub.googleapis.com/projects/" + project + "/topics/stalesweep-syncs", "datacontenttype": "application/json",
		"data": json.RawMessage(cloudEventData(pushBody(data, nil, "structured-"+id))),
	})
	header := http.Header{"Content-Type": {"application/cloudevents+json; charset=utf-8"}}
	if code, out := post(t, "/SyncExecution", header, event); code != http.StatusOK {
		t.Fatalf("status %d %v", code, out)
	}
	if r := w.row(t, id); r.Active || r.Outcome != "succeeded" || r.Sync.Attempts != 1 {
		t.Errorf("row after a structured event: active=%t outcome=%s attempts=%d", r.Active, r.Outcome, r.Sync.Attempts)
	}
	// The same event with its data not a Pub/Sub message is acknowledged and changes nothing.
	bad, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "structured-bad-" + id, "type": message.MessagePublished,
		"source": "s", "data": map[string]any{"message": 7}})
	if code, _ := post(t, "/SyncExecution", header, bad); code != http.StatusOK {
		t.Errorf("a malformed structured event: status %d, want 200", code)
	}
}
