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
)

var name = cloudrunfake.ExecutionName("p", "europe-west1", "job", "job-001")

func setup(t *testing.T, cfg cloudrun.Config) (*cloudrunfake.Server, *cloudrun.Adapter) {
	t.Helper()
	fake, err := cloudrunfake.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	client, err := cloudrun.Dial(context.Background(), fake.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
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

func TestObserveNotFoundIsUnknownNotAnError(t *testing.T) {
	fake, a := setup(t, cloudrun.Config{})
	snap, err := a.Observe(context.Background(), ref(name))
	if err != nil {
		t.Fatalf("NotFound returned an error: %v", err)
	}
	if snap.Verdict != executor.VerdictUnknown {
		t.Fatalf("verdict = %s, want unknown", snap.Verdict)
	}
	if got := fake.Calls(cloudrunfake.GetExecution); got != 1 {
		t.Errorf("NotFound made %d calls, want 1 (never retried)", got)
	}
}

func TestObserveRetriesUnavailableOnly(t *testing.T) {
	tests := []struct {
		name      string
		code      codes.Code
		failures  int
		wantCode  codes.Code
		wantCalls int
	}{
		{"Unavailable twice then success", codes.Unavailable, 2, codes.OK, 3},
		{"Unavailable on every attempt", codes.Unavailable, 10, codes.Unavailable, 3},
		{"Internal is not retried", codes.Internal, 1, codes.Internal, 1},
		{"ResourceExhausted is not retried", codes.ResourceExhausted, 1, codes.ResourceExhausted, 1},
		{"PermissionDenied is not retried", codes.PermissionDenied, 1, codes.PermissionDenied, 1},
		{"DeadlineExceeded is not retried", codes.DeadlineExceeded, 1, codes.DeadlineExceeded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, a := setup(t, cloudrun.Config{MaxAttempts: 3})
			if err := fake.SetExecution(cloudrunfake.Running(name, time.Now())); err != nil {
				t.Fatal(err)
			}
			fake.FailNext(cloudrunfake.GetExecution, tt.code, tt.failures)
			snap, err := a.Observe(context.Background(), ref(name))
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %s (err %v), want %s", got, err, tt.wantCode)
			}
			if err == nil && snap.Verdict != executor.VerdictRunning {
				t.Errorf("verdict = %s, want running", snap.Verdict)
			}
			if got := fake.Calls(cloudrunfake.GetExecution); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestObserveBoundsEachCallWithItsTimeout(t *testing.T) {
	fake, a := setup(t, cloudrun.Config{CallTimeout: 50 * time.Millisecond})
	if err := fake.SetExecution(cloudrunfake.Running(name, time.Now())); err != nil {
		t.Fatal(err)
	}
	fake.SetLatency(cloudrunfake.GetExecution, time.Minute)
	start := time.Now()
	_, err := a.Observe(context.Background(), ref(name))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("the call ran %s: the timeout did not bound it", elapsed)
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
