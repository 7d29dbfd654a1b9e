package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// pushRecorder stands between the Pub/Sub emulator's push subscriptions and the functions
// server for one test: each push is forwarded unchanged to the served target at baseURL, and
// what came back is recorded. It is how a test knows that no message is outstanding — every
// message known to be published has been answered 200 — and how many were delivered; the
// emulator itself offers nothing to ask.
type pushRecorder struct {
	url string

	mu       sync.Mutex
	inFlight int
	targets  map[string]*targetLog
}

// testPushHeader marks a push the test itself sends through the recorder (a redelivery it
// makes), so that the emulator's own concurrency is measured apart.
const testPushHeader = "X-Test-Push"

// targetLog is what one target was pushed.
type targetLog struct {
	inFlight, maxInFlight int // the emulator's pushes being handled; the most at once
	pushes                int
	status                map[int]int
	acked                 map[string]bool            // message ids answered 200
	byRun                 map[string]map[string]bool // workflow_run_uuid attribute → message ids answered 200
	bodies                []recordedPush             // every push answered 200, first delivery of each message id
	published             int                        // Dispatch: sweep messages its deliveries said they published
}

// recordedPush is one acknowledged push, as the emulator sent it.
type recordedPush struct {
	ID    string
	Data  []byte
	Attrs map[string]string
	Body  []byte // the raw push body
}

// watchPushes points the pipeline's three push subscriptions at a new recorder for the rest of
// the test, and back at the functions server when it ends.
func watchPushes(t *testing.T) *pushRecorder {
	t.Helper()
	r := &pushRecorder{targets: map[string]*targetLog{}}
	srv := httptest.NewServer(http.HandlerFunc(r.forward))
	r.url = srv.URL
	if err := pointPushes(r.url); err != nil {
		srv.Close()
		t.Fatalf("point the push subscriptions at the recorder: %v", err)
	}
	t.Cleanup(func() {
		if err := pointPushes(baseURL); err != nil {
			t.Errorf("point the push subscriptions back at the functions server: %v", err)
		}
		srv.Close()
	})
	return r
}

// pointPushes makes every route of the pipeline push to url/TARGET.
func pointPushes(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return err
	}
	defer ps.Close()
	for _, route := range pipeline.Routes(pipeline.Topics{}) {
		if err := ps.SubscriptionAdminClient.ModifyPushConfig(ctx, &pubsubpb.ModifyPushConfigRequest{
			Subscription: fmt.Sprintf("projects/%s/subscriptions/%s", project, route.Subscription),
			PushConfig:   &pubsubpb.PushConfig{PushEndpoint: url + "/" + route.Target},
		}); err != nil {
			return fmt.Errorf("modify push config of %s: %w", route.Subscription, err)
		}
	}
	return nil
}

var forwarder = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

func (r *pushRecorder) forward(w http.ResponseWriter, req *http.Request) {
	target := strings.TrimPrefix(req.URL.Path, "/")
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	byTest := req.Header.Get(testPushHeader) != ""
	r.mu.Lock()
	r.inFlight++
	if !byTest {
		tl := r.log(target)
		tl.inFlight++
		tl.maxInFlight = max(tl.maxInFlight, tl.inFlight)
	}
	r.mu.Unlock()
	status, published := http.StatusBadGateway, 0
	defer func() {
		r.record(target, body, status, byTest, published)
		w.WriteHeader(status)
	}()
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, baseURL+req.URL.Path, bytes.NewReader(body))
	if err != nil {
		return
	}
	out.Header = req.Header.Clone()
	out.Header.Del(testPushHeader)
	resp, err := forwarder.Do(out)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	status = resp.StatusCode
	published, _ = strconv.Atoi(resp.Header.Get(HeaderPublished))
}

func (r *pushRecorder) record(target string, body []byte, status int, byTest bool, published int) {
	var p struct {
		Message struct {
			Data       []byte            `json:"data"`
			Attributes map[string]string `json:"attributes"`
			MessageID  string            `json:"messageId"`
		} `json:"message"`
	}
	_ = json.Unmarshal(body, &p)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	tl := r.log(target)
	if !byTest {
		tl.inFlight--
	}
	tl.pushes++
	tl.status[status]++
	tl.published += published
	id := p.Message.MessageID
	if status != http.StatusOK || id == "" {
		return
	}
	if !tl.acked[id] {
		tl.bodies = append(tl.bodies, recordedPush{ID: id, Data: p.Message.Data, Attrs: p.Message.Attributes, Body: body})
	}
	tl.acked[id] = true
	if run := p.Message.Attributes[message.AttrWorkflowRunUUID]; run != "" {
		if tl.byRun[run] == nil {
			tl.byRun[run] = map[string]bool{}
		}
		tl.byRun[run][id] = true
	}
}

// log returns target's log; r.mu must be held.
func (r *pushRecorder) log(target string) *targetLog {
	tl := r.targets[target]
	if tl == nil {
		tl = &targetLog{status: map[int]int{}, acked: map[string]bool{}, byRun: map[string]map[string]bool{}}
		r.targets[target] = tl
	}
	return tl
}

// pushSummary is a copy of what one target was pushed.
type pushSummary struct {
	Pushes   int         // deliveries, redeliveries (the emulator's and the test's) included
	Status   map[int]int // by HTTP status
	Acked    int         // distinct messages answered 200
	AckedRun map[string]int
}

func (s pushSummary) String() string {
	return fmt.Sprintf("%d pushes (%d messages acknowledged; answers %v)", s.Pushes, s.Acked, s.Status)
}

// summary returns what target was pushed so far.
func (r *pushRecorder) summary(target string) pushSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	tl := r.log(target)
	s := pushSummary{Pushes: tl.pushes, Status: map[int]int{}, Acked: len(tl.acked), AckedRun: map[string]int{}}
	for k, v := range tl.status {
		s.Status[k] = v
	}
	for run, ids := range tl.byRun {
		s.AckedRun[run] = len(ids)
	}
	return s
}

// ackedFor is how many distinct messages of run were answered 200 by target.
func (r *pushRecorder) ackedFor(target, run string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log(target).byRun[run])
}

// pushes returns the acknowledged pushes of target, in the order they were answered.
func (r *pushRecorder) pushes(target string) []recordedPush {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedPush(nil), r.log(target).bodies...)
}

// busy is how many pushes are being handled right now.
func (r *pushRecorder) busy() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// mostBusy is the most pushes of target the emulator had under way at once.
func (r *pushRecorder) mostBusy(target string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log(target).maxInFlight
}

// await polls cond until it holds, failing the test after timeout with what cond last said
// about the progress. It waits on the emulator's asynchronous pushes, which offer nothing to
// block on.
func await(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, progress := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, progress)
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
}

// published is how many sweep messages the Dispatch deliveries it forwarded said they published.
func (r *pushRecorder) published() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log("Dispatch").published
}
