package cloudrun_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
)

var name = cloudrunfake.ExecutionName("p", "europe-west1", "job", "job-001")

func setup(t *testing.T, cfg cloudrun.Config) (*cloudrunfake.Server, *cloudrun.Adapter) {
	t.Helper()
	fake, client := cloudruntest.Start(t)
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	return fake, cloudrun.New(client, cfg)
}

func ref(n string) map[string]any { return map[string]any{"execution": n} }

func TestObserveClassifiesWhatCloudRunSays(t *testing.T) {
	fake, a := setup(t, cloudrun.Config{})
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	if err := fake.SetExecution(cloudrunfake.Failed(name, at, 0)); err != nil {
		t.Fatal(err)
	}
	snap, err := a.Observe(context.Background(), ref(name))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Verdict != executor.VerdictFailed || !snap.FinishedAt.Equal(at) {
		t.Fatalf("snapshot = %+v, want failed at %v", snap, at)
	}
	if snap.Evidence["etag"] == "" || snap.Evidence["log_uri"] == "" {
		t.Errorf("evidence lacks etag or log uri: %v", snap.Evidence)
	}
}

// Internal is Cloud Run's own code (an API server's 500 is Unavailable to the Kubernetes
// adapter): not retried. The codes both executors answer are the conformance suite's.
func TestObserveDoesNotRetryInternal(t *testing.T) {
	fake, a := setup(t, cloudrun.Config{})
	if err := fake.SetExecution(cloudrunfake.Running(name, time.Now())); err != nil {
		t.Fatal(err)
	}
	fake.FailNext(cloudrunfake.GetExecution, codes.Internal, 1)
	if _, err := a.Observe(context.Background(), ref(name)); status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want Internal", err)
	}
	if got := fake.Calls(cloudrunfake.GetExecution); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}
}

func TestObserveRefusesARefThatIsNotAnExecution(t *testing.T) {
	fake, a := setup(t, cloudrun.Config{})
	_, err := a.Observe(context.Background(), map[string]any{"execution": "jobs/j"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
	if fake.Calls(cloudrunfake.GetExecution) != 0 {
		t.Error("a malformed ref reached Cloud Run")
	}
}

func TestDialRefusesEndpointsOffLoopback(t *testing.T) {
	for _, ep := range []string{"10.0.0.1:443", "example.com:443", "run.googleapis.com", ":8080"} {
		if _, err := cloudrun.Dial(context.Background(), ep); err == nil {
			t.Errorf("Dial(%q) succeeded; want a loopback-only refusal", ep)
		}
	}
	for _, ep := range []string{"127.0.0.1:1", "localhost:1", "[::1]:1"} {
		if err := cloudrun.RequireLoopback(ep); err != nil {
			t.Errorf("RequireLoopback(%q) = %v, want nil", ep, err)
		}
	}
}
