package functions

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testenv"
)

var (
	fake    *cloudrunfake.Server
	project = testenv.Project()
	baseURL string
)

// TestMain serves the registered targets through the functions framework, as `stalesweep serve`
// and the platform do, against the Firestore emulator and the Cloud Run fake.
func TestMain(m *testing.M) {
	var err error
	if fake, err = cloudrunfake.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	port, err := gcloudemu.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("GOOGLE_CLOUD_PROJECT", project)
	os.Setenv(cloudrun.EndpointEnv, fake.Addr)
	os.Unsetenv("FUNCTION_TARGET")
	baseURL = "http://127.0.0.1:" + strconv.Itoa(port)
	go func() {
		// The framework's server cannot be stopped; it ends with the test binary.
		if err := funcframework.StartHostPort("127.0.0.1", strconv.Itoa(port)); err != nil {
			fmt.Fprintln(os.Stderr, "functions framework:", err)
		}
	}()
	testenv.Main(m)
}

// waitServing waits until the framework answers, so no test races its start.
func waitServing(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the functions framework is not serving: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling a server's start, not standing in for a result
	}
}

type world struct {
	fs  *firestore.Client
	org string
}

func newWorld(t *testing.T) world {
	waitServing(t)
	fake.ClearFaults()
	return world{fs: testenv.FirestoreProject(t, project), org: uuid.NewString()}
}

// stale seeds a stale row whose execution Cloud Run reports succeeded.
func (w world) stale(t *testing.T) string {
	t.Helper()
	id := uuid.NewString()
	name := cloudrunfake.ExecutionName("p", "l", "job", id[:8])
	if err := fake.SetExecution(cloudrunfake.Succeeded(name, time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	_, err := w.fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(context.Background(), map[string]any{
		"organization_uuid": w.org, "provider": "cloud_run", "status": "running", "active": true,
		"observed_at": time.Now().Add(-time.Hour), "provider_ref": map[string]any{"execution": name},
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (w world) active(t *testing.T, id string) bool {
	t.Helper()
	snap, err := w.fs.Collection(ledger.ExecutionsCollection).Doc(id).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := snap.DataAt("active")
	return v == true
}

func (w world) runRecords(t *testing.T) []map[string]any {
	t.Helper()
	snaps, err := w.fs.Collection(ledger.RunsCollection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, s := range snaps {
		out = append(out, s.Data())
	}
	return out
}

func post(t *testing.T, path string, header http.Header, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, baseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

func TestStartWorkflowRunsOneScopeAndReturnsItsOutput(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t)
	body := fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q}}`, w.org)
	code, out := post(t, "/StartWorkflow", http.Header{"Content-Type": {"application/json"}}, []byte(body))
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	if out["started_count"] != float64(1) || out["organization_uuid"] != w.org || out["limit"] != float64(25) || out["completed_at"] == nil {
		t.Errorf("output = %v", out)
	}
	if w.active(t, id) {
		t.Error("the stale row was not settled")
	}
	recs := w.runRecords(t)
	if len(recs) != 1 || recs[0]["trigger"] != "manual" || recs[0]["status"] != "completed" {
		t.Errorf("run records = %v", recs)
	}
}

func TestStartWorkflowErrors(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name, method, body string
		status             int
		code, field        string
	}{
		{"limit 0", "POST", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": "` + w.org + `", "limit": 0}}`, 400, "validation_failed", "limit"},
		{"missing organization", "POST", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {}}`, 400, "validation_failed", "organization_uuid"},
		{"unknown workflow", "POST", `{"workflow_type": "runner.nope"}`, 400, "validation_failed", "workflow_type"},
		{"not JSON", "POST", `{"workflow_type"`, 400, "validation_failed", "body"},
		{"unknown top-level field", "POST", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "input": {}}`, 400, "validation_failed", "input"},
		{"GET", "GET", ``, 400, "validation_failed", "method"},
		{"oversized", "POST", `{"workflow_type": "` + strings.Repeat("a", 2<<20) + `"}`, 400, "validation_failed", "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, baseURL+"/StartWorkflow", strings.NewReader(tt.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
					Details struct {
						Violations []struct{ Field, Rule string } `json:"violations"`
					} `json:"details"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tt.status || got.Error.Code != tt.code {
				t.Fatalf("status %d code %s, want %d %s (%s)", resp.StatusCode, got.Error.Code, tt.status, tt.code, got.Error.Message)
			}
			if len(got.Error.Details.Violations) == 0 || got.Error.Details.Violations[0].Field != tt.field {
				t.Errorf("violations %+v do not name %s", got.Error.Details.Violations, tt.field)
			}
		})
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("refused requests left %d run records", len(recs))
	}
}

func TestStartWorkflowAnswers500WhenTheRunFails(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t)
	fake.FailRate(cloudrunfake.GetExecution, codes.PermissionDenied, 1)
	defer fake.ClearFaults()
	body := fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q}}`, w.org)
	code, out := post(t, "/StartWorkflow", nil, []byte(body))
	if code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", code)
	}
	e, _ := out["error"].(map[string]any)
	details, _ := e["details"].(map[string]any)
	output, _ := details["output"].(map[string]any)
	if e["code"] != "internal" || details["workflow_run_uuid"] == nil || output["failure_reason"] != "executor_permission_denied" {
		t.Errorf("body = %v", out)
	}
	if !w.active(t, id) {
		t.Error("a row was settled by a run whose executor refused access")
	}
}

// pubsubEvent builds a binary-mode messagePublished CloudEvent request, as Eventarc sends it.
func pubsubEvent(data []byte, attrs map[string]string) (http.Header, []byte) {
	body, _ := json.Marshal(map[string]any{
		"message": map[string]any{
			"data": base64.StdEncoding.EncodeToString(data), "attributes": attrs, "messageId": uuid.NewString(),
			"publishTime": time.Now().UTC().Format(time.RFC3339Nano),
		},
		"subscription": "projects/p/subscriptions/eventarc-sub",
	})
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Ce-Id":          {uuid.NewString()},
		"Ce-Specversion": {"1.0"},
		"Ce-Type":        {"google.cloud.pubsub.topic.v1.messagePublished"},
		"Ce-Source":      {"//pubsub.googleapis.com/projects/p/topics/stalesweep-sweeps"},
	}
	return h, body
}

func TestSweepRunsTheMessagesWorkflow(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t)
	h, body := pubsubEvent([]byte(fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q}}`, w.org)),
		map[string]string{"trigger": "schedule"})
	if code, out := post(t, "/Sweep", h, body); code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	if w.active(t, id) {
		t.Error("the stale row was not settled")
	}
	recs := w.runRecords(t)
	if len(recs) != 1 || recs[0]["trigger"] != "schedule" || recs[0]["status"] != "completed" {
		t.Errorf("run records = %v", recs)
	}
}

func TestSweepAcknowledgesMalformedMessagesWithoutARun(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t)
	for name, data := range map[string]string{
		"not JSON":         `{{{`,
		"unknown workflow": `{"workflow_type": "nope"}`,
		"invalid input":    `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": "x"}}`,
		"empty":            ``,
	} {
		h, body := pubsubEvent([]byte(data), nil)
		if code, out := post(t, "/Sweep", h, body); code != http.StatusOK {
			t.Errorf("%s: status %d (%v), want 200: a malformed message must not be redelivered", name, code, out)
		}
	}
	h, _ := pubsubEvent(nil, nil)
	if code, _ := post(t, "/Sweep", h, []byte(`{"subscription": "s"}`)); code != http.StatusOK {
		t.Errorf("an event without a message: status %d, want 200", code)
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("malformed messages left %d run records", len(recs))
	}
	if !w.active(t, id) {
		t.Error("a malformed message settled a row")
	}
}
