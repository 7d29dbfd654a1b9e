package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// explain's text says what holds in words an operator can act on: a task that does not decode has
// no silence to judge, an invisible execution row is counted where runs count it, a fleet-wide
// pause is called fleet-wide, and no JSON log line is mixed into the text on stderr.
func TestExplainTextSaysWhatHolds(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	t.Setenv("STALESWEEP_LOG_LEVEL", "debug")
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)

	// A working task whose reclaim_count is a word: it does not decode.
	if _, err := fs.Collection(ledger.TaskQueuesCollection).Doc("builds").Collection(ledger.TasksCollection).Doc("bad").Set(ctx, map[string]any{
		"status": ledger.TaskWorking, "last_activity_at": old, "reclaim_count": "five",
	}); err != nil {
		t.Fatal(err)
	}
	if err := pausestore.New(fs).Put(ctx, pausestore.Pause{WorkflowType: "pm.sweep", PausedBy: "test", PausedAt: old, Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := invoke(t, "explain", "tasks/builds/bad")
	if code != exitOK {
		t.Fatalf("explain tasks/builds/bad: exit %d\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "2562047h") || !strings.Contains(stdout, "cannot be judged") {
		t.Errorf("a task that does not decode: the silence is not said to be unjudgeable:\n%s", stdout)
	}
	if !strings.Contains(stdout, "fleet-wide") || strings.Contains(stdout, "paused on the queue") {
		t.Errorf("a fleet-wide pause is not called fleet-wide:\n%s", stdout)
	}
	if strings.Contains(stderr, `"severity"`) {
		t.Errorf("explain's text mode wrote JSON log lines to stderr: %s", stderr)
	}
	// A dry run's preview says the same of the fleet-wide pause.
	tasks := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(old)}
	if err := tasks.Enqueue(ctx, "deploys", "a", "slug-a", old); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Next(ctx, "deploys", "w", old); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = invoke(t, "pm", "sweep", "--queue", "deploys", "--dry-run", "-o", "run")
	if code != exitOK || !strings.Contains(stdout, "the sweep is paused fleet-wide") {
		t.Errorf("pm sweep --dry-run under a fleet-wide pause: exit %d, want its preview to say fleet-wide:\n%s%s", code, stdout, stderr)
	}

	// A runner execution whose observed_at is a string: no scan sees it.
	org, id := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org)
	if _, err := fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(ctx, map[string]any{
		"organization_uuid": org, "provider": "cloud_run", "active": true, "status": "running",
		"observed_at":  "2026-11-29T08:00:00Z",
		"provider_ref": map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"},
	}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = invoke(t, "explain", ledger.ExecutionsCollection+"/"+id)
	if code != exitOK || !strings.Contains(stdout, "stats.invisible") || strings.Contains(stdout, "skipped_missing_metadata_count") {
		t.Errorf("an invisible row: exit %d, want it said to count in stats.invisible only:\n%s%s", code, stdout, stderr)
	}

	// A visible row whose executor call fails: the warning is said in plain text, not JSON, and
	// in JSON mode it stays Cloud Logging's JSON.
	live := "row-" + uuid.NewString()[:8]
	staleRow(t, fs, fake, org, live, func(name string, at time.Time) *runpb.Execution { return cloudrunfake.Running(name, at) })
	fake.FailRate(cloudrunfake.GetExecution, codes.Unavailable, 1)
	code, stdout, stderr = invoke(t, "explain", ledger.ExecutionsCollection+"/"+live)
	if code != exitOK || !strings.Contains(stdout, "call failed") || strings.Contains(stderr, `"severity"`) || !strings.Contains(stderr, "level=WARN") {
		t.Errorf("a failed executor call in text mode: exit %d, want its warning in plain text:\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr = invoke(t, "explain", ledger.ExecutionsCollection+"/"+live, "-o", "json"); code != exitOK || !strings.Contains(stderr, `"severity"`) {
		t.Errorf("a failed executor call with -o json: exit %d, want its warning as JSON: %s", code, stderr)
	}
}
