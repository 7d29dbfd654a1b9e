package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(removingBinary{m}) }

func invoke(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// refusal is a command line the CLI refuses as invalid, and what its error must name.
type refusal struct {
	args []string
	name string
}

// refusesNaming fails the test unless each command line exits 2 with stderr naming its name.
func refusesNaming(t *testing.T, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		if code, _, stderr := invoke(t, c.args...); code != exitInvalid || !strings.Contains(stderr, c.name) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", c.args, code, stderr, exitInvalid, c.name)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"run"}, {"run", "a", "b"}, {"run", "--bogus"}} {
		if code, _, _ := invoke(t, args...); code != exitInvalid {
			t.Errorf("stalesweep %v exited %d, want %d", args, code, exitInvalid)
		}
	}
	if code, out, _ := invoke(t, "help"); code != 0 || !strings.Contains(out, "run one workflow inline") {
		t.Errorf("help exited %d: %s", code, out)
	}
}

func TestBenchRefusesBadSizesNamingTheFlag(t *testing.T) {
	refusesNaming(t, []refusal{
		{[]string{"bench", "--rows", "-1"}, "--rows"},
		{[]string{"bench", "--rows", "100001"}, "--rows"},
		{[]string{"bench", "--concurrency", "0"}, "--concurrency"},
		{[]string{"bench", "--concurrency", "65"}, "--concurrency"},
		{[]string{"bench", "extra"}, "extra"},
	})
}

func TestRunRefusesInvalidInputWithTheFieldNamed(t *testing.T) {
	for data, field := range map[string]string{
		`{}`: "organization_uuid",
		`{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "limit": 0}`:     "limit",
		`{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "limit": "ten"}`: "limit",
		`{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "x": 1}`:         "x",
	} {
		code, _, stderr := invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", data)
		if code != exitInvalid || !strings.Contains(stderr, field) {
			t.Errorf("--data %s: exit %d, stderr %q; want %d naming %s", data, code, stderr, exitInvalid, field)
		}
	}
	if code, _, stderr := invoke(t, "run", "runner.unknown", "--data", "{}"); code != exitInvalid || !strings.Contains(stderr, "workflow_type") {
		t.Errorf("unknown workflow: exit %d, %q", code, stderr)
	}
}

// cloudRunWorld points the command at a new project of the Firestore emulator and at a Cloud
// Run fake.
// commandFirestore is a Firestore project of the test's own, the one the command run by invoke
// reads (GOOGLE_CLOUD_PROJECT).
func commandFirestore(t *testing.T) *firestore.Client {
	t.Helper()
	project := testenv.Project()
	t.Setenv("GOOGLE_CLOUD_PROJECT", project)
	return testenv.FirestoreProject(t, project)
}

func cloudRunWorld(t *testing.T) (*cloudrunfake.Server, *firestore.Client, string) {
	t.Helper()
	fake, err := cloudrunfake.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	project := testenv.Project()
	t.Setenv("GOOGLE_CLOUD_PROJECT", project)
	t.Setenv(cloudrun.EndpointEnv, fake.Addr)
	return fake, testenv.FirestoreProject(t, project), project
}

// staleRow writes runner execution id of org, running and observed an hour ago, whose
// execution the fake reports as exec says.
func staleRow(t *testing.T, fs *firestore.Client, fake *cloudrunfake.Server, org, id string, exec func(name string, at time.Time) *runpb.Execution) {
	t.Helper()
	name := cloudrunfake.ExecutionName("p", "l", "job", "e-"+id)
	if err := fake.SetExecution(exec(name, time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(context.Background(), map[string]any{
		"organization_uuid": org, "provider": "cloud_run", "status": "running", "active": true,
		"observed_at": time.Now().Add(-time.Hour), "provider_ref": map[string]any{"execution": name},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestRunSettlesAndPrintsTheOutput(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	staleRow(t, fs, fake, org, "row-1", func(name string, at time.Time) *runpb.Execution {
		return cloudrunfake.Failed(name, at, runpb.Condition_NON_ZERO_EXIT_CODE)
	})

	// Flags after the positional argument, and --data from a file.
	file := filepath.Join(t.TempDir(), "data.json")
	if err := os.WriteFile(file, []byte(`{"organization_uuid": "`+org+`", "limit": 10}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", "@"+file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not the output JSON: %v\n%s", err, stdout)
	}
	if out["started_count"] != float64(1) || out["limit"] != float64(10) {
		t.Errorf("output = %v", out)
	}
	snap, err := fs.Collection(ledger.ExecutionsCollection).Doc("row-1").Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := snap.DataAt("outcome"); v != "failed" {
		t.Errorf("row outcome = %v, want failed", v)
	}

	// A run that fails exits 1 and still prints its output.
	staleRow(t, fs, fake, org, "row-2", cloudrunfake.Running)
	fake.FailRate(cloudrunfake.GetExecution, codes.PermissionDenied, 1)
	code, stdout, _ = invoke(t, "run", "--data", `{"organization_uuid": "`+org+`"}`, "runner.execution-sync-stale-cloud-run")
	if code != exitFailed || !strings.Contains(stdout, "executor_permission_denied") {
		t.Errorf("failed run: exit %d, stdout %s", code, stdout)
	}
}

func TestIndexesCheck(t *testing.T) {
	if code, _, stderr := invoke(t, "indexes", "--check", "--root", "../.."); code != exitOK {
		t.Errorf("the checked-in index files are not current: %s", stderr)
	}
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "terraform"), 0o755)
	if code, _, _ := invoke(t, "indexes", "--check", "--root", dir); code != exitFailed {
		t.Errorf("--check passed missing files (exit %d)", code)
	}
	if code, _, _ := invoke(t, "indexes", "--root", dir); code != exitOK {
		t.Fatal("writing the indexes failed")
	}
	if code, _, _ := invoke(t, "indexes", "--check", "--root", dir); code != exitOK {
		t.Error("freshly written files do not pass --check")
	}
	_ = os.WriteFile(filepath.Join(dir, "terraform", "firestore_indexes.tf.json"), []byte(`{}`), 0o600)
	if code, _, stderr := invoke(t, "indexes", "--check", "--root", dir); code != exitFailed || !strings.Contains(stderr, "firestore_indexes.tf.json") {
		t.Errorf("--check passed a stale Terraform file (exit %d)", code)
	}
}

func TestFakeCloudRunServesTheExecutionsFile(t *testing.T) {
	name := cloudrunfake.ExecutionName("p", "l", "job", "from-file")
	b, err := cloudrunfake.MarshalExecutions([]*runpb.Execution{cloudrunfake.Cancelled(name, time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "execs.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"fake-cloudrun", "--executions", file}, nil, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	fields := strings.Fields(line) // "fake Cloud Run Executions on ADDR with N executions"
	addr := fields[5]
	client, err := cloudrun.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	snap, err := cloudrun.New(client, cloudrun.Config{}).Observe(context.Background(), map[string]any{"execution": name})
	if err != nil || snap.Verdict != "cancelled" {
		t.Errorf("observe through the command's fake: %v %v", snap.Verdict, err)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("fake-cloudrun exited %d", code)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`[{"name": "x"}]`), 0o600)
	if code, _, stderr := invoke(t, "fake-cloudrun", "--executions", bad); code != exitInvalid || !strings.Contains(stderr, "executions[0].name") {
		t.Errorf("bad file: exit %d, %q", code, stderr)
	}
	if code, _, _ := invoke(t, "fake-cloudrun", "--addr", "0.0.0.0:0"); code != exitInvalid {
		t.Errorf("a non-loopback address was accepted (exit %d)", code)
	}
}

func TestRunTheFleetSweepUnclampedFromTheCommand(t *testing.T) {
	fs := commandFirestore(t)
	store := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
	if err := (ledgertest.ExtensionRuns{Client: fs}).Start(context.Background(), ledger.ExtensionRun{RunID: "r1", TenantID: "t", ExtensionID: "e", JobName: "j", Background: true},
		time.Now().Add(-50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := invoke(t, "run", "platform.extension.runs.sweep", "--data", `{"older_than_ms": 1}`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out["swept"] != float64(1) || len(out) != 3 {
		t.Errorf("output %s (%v)", stdout, err)
	}
	if r, _ := ledgertest.Value(store.Row(context.Background(), "r1")); r.Outcome != ledger.OutcomeAbandoned {
		t.Errorf("run = %+v", r)
	}
}

func TestPMSweepCommand(t *testing.T) {
	fs := commandFirestore(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	// Firestore took these writes an hour ago (the command reads Firestore's own clock).
	tasks := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(old)}
	for _, id := range []string{"a", "b"} {
		if err := tasks.Enqueue(ctx, "builds", id, "slug-"+id, old); err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.Next(ctx, "builds", "w-"+id, old); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := invoke(t, "pm", "sweep", "--queue", "builds", "--ttl", "60", "--dry-run")
	var out map[string]any
	if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil || out["stale"] != float64(2) || out["dry_run"] != true {
		t.Fatalf("dry run: exit %d, %s %s", code, stdout, stderr)
	}
	code, stdout, _ = invoke(t, "pm", "sweep", "--queue", "builds", "--ttl", "60", "--reclaimer", "ops")
	_ = json.Unmarshal([]byte(stdout), &out)
	if code != exitOK || len(out["reclaimed"].([]any)) != 2 || out["ttl"] != float64(60) {
		t.Errorf("sweep: exit %d, %s", code, stdout)
	}
	if code, _, _ := invoke(t, "pm", "sweep", "--queue", "builds"); code != exitOK {
		t.Errorf("a sweep with nothing to do exited %d", code)
	}
	for _, args := range [][]string{{"pm", "sweep", "--ttl", "0"}, {"pm", "sweep", "--queue", "a/b"}, {"pm"}, {"pm", "sweep", "extra"}} {
		if code, _, _ := invoke(t, args...); code != exitInvalid {
			t.Errorf("%v exited %d, want %d", args, code, exitInvalid)
		}
	}
}

func TestTheStormGuardStopsTheCommandUntilTheOperatorOverridesIt(t *testing.T) {
	fs := commandFirestore(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	tasks := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(old)}
	for i := range 12 {
		id := fmt.Sprintf("t%02d", i)
		if err := tasks.Enqueue(ctx, "builds", id, "s", old); err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.Next(ctx, "builds", "w", old); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := invoke(t, "pm", "sweep", "--queue", "builds", "--ttl", "60")
	var out map[string]any
	if code != exitFailed || json.Unmarshal([]byte(stdout), &out) != nil || len(out["reclaimed"].([]any)) != 0 || !strings.Contains(stderr, "storm guard") {
		t.Fatalf("every task silent: exit %d, %s %s; want 1, nothing reclaimed, the storm guard named", code, stdout, stderr)
	}
	code, stdout, stderr = invoke(t, "pm", "sweep", "--queue", "builds", "--ttl", "60", "--override-storm-guard")
	if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil || len(out["reclaimed"].([]any)) != 12 || !strings.Contains(stderr, "overridden") {
		t.Errorf("with the override: exit %d, %s %s", code, stdout, stderr)
	}
}

func TestTheKubernetesWorkflowIsInTheDefaultBuild(t *testing.T) {
	project := testenv.Project()
	t.Setenv("GOOGLE_CLOUD_PROJECT", project)
	t.Setenv("STALESWEEP_KUBE_CLUSTERS", `{"clusters": {"eu": {"host": "https://127.0.0.1:1", "token_file": "/nonexistent"}}}`)
	testenv.Enable(t, testenv.FirestoreProject(t, project), "0f8fad5b-d9cb-469f-a165-70867728950e")
	code, stdout, stderr := invoke(t, "run", "runner.execution-sync-stale-kubernetes", "--data", `{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}`)
	if code != exitOK || !strings.Contains(stdout, `"candidate_count": 0`) {
		t.Errorf("exit %d: %s %s", code, stdout, stderr)
	}
	t.Setenv("STALESWEEP_KUBE_CLUSTERS", `{"clusters": {"eu": {}}}`)
	if code, _, stderr := invoke(t, "run", "runner.execution-sync-stale-kubernetes", "--data", `{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}`); code != exitInvalid || strings.Count(stderr, "STALESWEEP_KUBE_CLUSTERS") != 1 {
		t.Errorf("a broken cluster configuration: exit %d: %s; want %d naming the variable once", code, stderr, exitInvalid)
	}
}

// An organization that opted out of sweeps is swept from the command only when the operator
// says so; the run record names the operator as the local user, and what they claimed apart.
func TestRunSweepsAnOrganizationThatOptedOutOnlyWithIncludeDisabled(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	t.Setenv(envActor, "someone-else@example.com")
	ctx := context.Background()
	for _, doc := range []string{"absent", "disabled"} {
		org := uuid.NewString()
		if doc == "disabled" {
			if err := (ledgertest.Organizations{Client: fs}).Put(ctx, ledger.Organization{UUID: org, SweepsEnabled: false}); err != nil {
				t.Fatal(err)
			}
		}
		row := "row-" + doc
		staleRow(t, fs, fake, org, row, cloudrunfake.Succeeded)
		data := `{"organization_uuid": "` + org + `"}`
		code, stdout, stderr := invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", data)
		if code != exitInvalid || !strings.Contains(stderr, "--include-disabled") || stdout != "" {
			t.Errorf("organizations document %s: exit %d, stderr %q; want %d naming --include-disabled", doc, code, stderr, exitInvalid)
		}
		if outcome(t, fs, row) != nil {
			t.Errorf("organizations document %s: the refused run settled the row", doc)
		}
		code, stdout, stderr = invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", data, "--include-disabled")
		var out map[string]any
		if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil || out["started_count"] != float64(1) {
			t.Fatalf("organizations document %s, --include-disabled: exit %d %s %s", doc, code, stdout, stderr)
		}
		if got := outcome(t, fs, row); got != "succeeded" {
			t.Errorf("organizations document %s, --include-disabled: row outcome %v", doc, got)
		}
		recs, err := fs.Collection(ledger.RunsCollection).Where("initial_data.organization_uuid", "==", org).Documents(ctx).GetAll()
		if err != nil || len(recs) != 1 {
			t.Fatalf("run records: %d, %v", len(recs), err)
		}
		var rec runstore.RunRecord
		if err := recs[0].DataTo(&rec); err != nil {
			t.Fatal(err)
		}
		if !rec.IncludeDisabled || rec.Actor != localActor() || !strings.HasPrefix(rec.Actor, "local:") || rec.ClaimedActor != "someone-else@example.com" {
			t.Errorf("run record: include_disabled %t, actor %q (want %q), claimed_actor %q", rec.IncludeDisabled, rec.Actor, localActor(), rec.ClaimedActor)
		}
	}
}

// outcome reads a runner execution's outcome, nil when it has none.
func outcome(t *testing.T, fs *firestore.Client, row string) any {
	t.Helper()
	snap, err := fs.Collection(ledger.ExecutionsCollection).Doc(row).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := snap.DataAt("outcome")
	return v
}

// The index commands the deploy guide pipes to sh, run by the real gcloud against a stand-in
// for the Firestore Admin API: each sends exactly one index of indexes.Composite.
func TestTheGcloudIndexCommandsCreateExactlyTheIndexesTheQueriesNeed(t *testing.T) {
	testenv.Need(t, testenv.Gcloud)
	if _, err := exec.LookPath("gcloud"); err != nil {
		t.Fatal("gcloud is not installed")
	}
	var mu sync.Mutex
	var got []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Fields []struct{ FieldPath, Order string }
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		parts := []string{r.Method + " " + r.URL.Path}
		for _, f := range body.Fields {
			parts = append(parts, f.FieldPath+" "+f.Order)
		}
		mu.Lock()
		got = append(got, strings.Join(parts, ", "))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"name": "projects/my-project/databases/(default)/operations/op", "metadata": {"@type": "type.googleapis.com/google.firestore.admin.v1.IndexOperationMetadata"}}`)
	}))
	defer admin.Close()
	code, stdout, _ := invoke(t, "indexes", "--gcloud", "--project", "my-project")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	token := filepath.Join(t.TempDir(), "token")
	_ = os.WriteFile(token, []byte("test"), 0o600)
	cmd := exec.Command("sh", "-e")
	cmd.Stdin = strings.NewReader(stdout)
	cmd.Env = append(os.Environ(), "CLOUDSDK_CONFIG="+t.TempDir(), "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE="+token,
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_FIRESTORE="+admin.URL+"/", "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the commands failed: %v\n%s", err, out)
	}
	var want []string
	for _, ix := range indexes.Composite() {
		parts := []string{"POST /v1/projects/my-project/databases/(default)/collectionGroups/" + ix.Collection + "/indexes"}
		for _, f := range ix.Fields {
			parts = append(parts, f.Path+" "+string(f.Order))
		}
		want = append(want, strings.Join(parts, ", "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("gcloud sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An operator lists the judged executor targets and clears one after checking.
func TestExecutorsListsAndClearsATarget(t *testing.T) {
	fs := commandFirestore(t)
	const target = "cloud_run:projects/p/locations/europe-west1"
	store := targetstore.New(fs, ledger.Retention{})
	if _, err := store.Record(context.Background(), ledger.Target{Target: target, Blind: true, JudgedAt: time.Now(), Asked: 30, Unknown: 30}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := invoke(t, "executors", "list", "-o", "json")
	var listed []ledger.Target
	if code != exitOK || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed) != 1 || !listed[0].Blind {
		t.Fatalf("list: exit %d, %s %s", code, stdout, stderr)
	}
	if code, _, stderr := invoke(t, "executors", "clear", target); code != exitOK || !strings.Contains(stderr, "cleared "+target) {
		t.Fatalf("clear: exit %d, %s", code, stderr)
	}
	got, _, err := store.Get(context.Background(), target)
	if err != nil || got.Blind || got.ClearedAt.IsZero() || !strings.HasPrefix(got.ClearedBy, "local:") {
		t.Errorf("after clear: %+v, %v", got, err)
	}
	for _, args := range [][]string{{"executors"}, {"executors", "clear"}, {"executors", "list", "extra"}, {"executors", "nope"}} {
		if code, _, _ := invoke(t, args...); code != exitInvalid {
			t.Errorf("%v exited %d, want %d", args, code, exitInvalid)
		}
	}
}
