package kubejobs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Only the API server's own NotFound for the Job is "the executor no longer knows it". A 404
// from something that is not the API server — a bare body, or a Status about another object —
// is an error, and leaves the row to be settled by nothing.
func TestOnlyTheAPIServersOwnNotFoundForTheJobIsUnknown(t *testing.T) {
	status404 := func(name, kind string) string {
		return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"jobs.batch \"` + name +
			`\" not found","reason":"NotFound","details":{"name":"` + name + `","group":"batch","kind":"` + kind + `"},"code":404}`
	}
	tests := []struct {
		name, contentType, body string
		unknown                 bool
	}{
		{"the API server: the Job is gone", "application/json", status404("build-1", "jobs"), true},
		{"a bare 404, as a proxy or a web server answers", "text/plain", "404 page not found", false},
		{"a JSON 404 that is no Status", "application/json", `{"error": "not found"}`, false},
		{"a Status about another Job", "application/json", status404("build-2", "jobs"), false},
		{"a Status about another kind", "application/json", status404("build-1", "pods"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			clusters, err := ParseClusters(`{"clusters": {"eu": {"host": "` + srv.URL + `"}}}`)
			if err != nil {
				t.Fatal(err)
			}
			a := New(NewSet(SetConfig{Clusters: clusters, Client: ClientConfig{Timeout: time.Second}}), Config{Backoff: time.Millisecond})
			snap, err := a.Observe(context.Background(), ref(runningJob("build-1")))
			switch {
			case tt.unknown && (err != nil || snap.Verdict != executor.VerdictUnknown):
				t.Errorf("got %v %v, want unknown", snap.Verdict, err)
			case !tt.unknown && (err == nil || status.Code(err) != codes.FailedPrecondition):
				t.Errorf("got %v %v, want a FailedPrecondition error, not a verdict", snap.Verdict, err)
			}
		})
	}
}

// A host entry any server could answer for is refused unless it is loopback: off loopback it
// needs https and a token.
func TestAHostEntryOffLoopbackNeedsTLSAndAToken(t *testing.T) {
	for cfg, ok := range map[string]bool{
		`{"host": "http://10.0.0.1:80"}`:                                           false,
		`{"host": "https://10.0.0.1:6443"}`:                                        false,
		`{"host": "http://10.0.0.1:80", "token_file": "/t"}`:                       false,
		`{"host": "https://10.0.0.1:6443", "token_file": "/t"}`:                    true,
		`{"host": "https://10.0.0.1:6443", "ca_data": "Zm9v", "token_file": "/t"}`: true,
		`{"host": "10.0.0.1:6443"}`:                                                false,
		`{"host": "http://127.0.0.1:8080"}`:                                        true,
		`{"host": "http://[::1]:8080"}`:                                            true,
		`{"host": "http://localhost:8080"}`:                                        true,
	} {
		_, err := ParseClusters(`{"clusters": {"x": ` + cfg + `}}`)
		if (err == nil) != ok {
			t.Errorf("%s: err = %v, want accepted %t", cfg, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), `cluster "x"`) {
			t.Errorf("%s: %v does not name the cluster", cfg, err)
		}
	}
}

// The workflow against a cluster entry that points at a server answering bare 404s: every row
// keeps its state, with the error recorded, however long past the grace.
func TestACluster404ThatIsNotKubernetesSettlesNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	}))
	defer srv.Close()
	clusters, err := ParseClusters(`{"clusters": {"eu": {"host": "` + srv.URL + `"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	a := New(NewSet(SetConfig{Clusters: clusters, Client: ClientConfig{Timeout: time.Second}}), Config{Backoff: time.Millisecond})
	fs := testenv.Firestore(t)
	clock := testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		id := uuid.NewString()
		if err := writer.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: ledger.ProviderKubernetes,
			ProviderRef: ref(runningJob(fmt.Sprintf("build-%d", i))), Status: ledger.StatusRunning, Active: true, ObservedAt: clock.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	engine := syncEngine(t, fs, store, a, clock.Now, time.Minute, 2)
	for range 3 {
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncKubernetes,
			InitialData: json.RawMessage(`{"organization_uuid": "` + org + `"}`), Trigger: workflow.TriggerLocal})
		if err != nil || out.Status != workflow.StateCompleted {
			t.Fatalf("run: %v %v", out.Err, err)
		}
		clock.Advance(time.Hour)
	}
	for _, id := range ids {
		r, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Active || r.Sync.LastVerdict != "" || !r.Sync.UnknownSince.IsZero() || !strings.HasPrefix(r.Sync.LastError, "FailedPrecondition: ") {
			t.Errorf("row %s: active=%t verdict=%q unknown_since=%v last_error=%q; want untouched but for the error", id, r.Active, r.Sync.LastVerdict, r.Sync.UnknownSince, r.Sync.LastError)
		}
	}
}
