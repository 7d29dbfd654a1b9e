package executionsync_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// env is one test's world: its own Firestore project, a Cloud Run fake, a clock, and the
// workflow wired as the app wires it.
type env struct {
	t      *testing.T
	fs     *firestore.Client
	spy    *fsspy.Spy
	store  *ledger.ExecutionStore
	runs   *runstore.Store
	fake   *cloudrunfake.Server
	clock  *testenv.Clock
	engine *workflow.Engine
	exec   executor.Executor
	syncer *executionsync.Syncer
	log    *slog.Logger
	org    string
	other  string
}

type options struct {
	cfg      executionsync.Config
	cloudRun cloudrun.Config
	// wrap lets a test stand between the workflow and the adapter.
	wrap func(executor.Executor) executor.Executor
	// dial adds options to the Firestore connection (a fault interceptor).
	dial []grpc.DialOption
	// guard turns the blind-executor guard on, as the app does.
	guard *blindguard.Config
	// logs, when set, receives the workflow's log lines (JSON).
	logs io.Writer
}

func newEnv(t *testing.T, o options) *env {
	t.Helper()
	e := &env{t: t, spy: fsspy.New(), clock: testenv.NewClock(epoch), org: uuid.NewString(), other: uuid.NewString()}
	e.fs = testenv.Firestore(t, append(e.spy.DialOptions(), o.dial...)...)
	testenv.Enable(t, e.fs, e.org, e.other)
	fake, client := cloudruntest.Start(t, cloudrunfake.WithClock(e.clock.Now), cloudrunfake.WithSeed(42))
	e.fake = fake

	e.store = ledger.NewExecutionStore(e.fs, ledger.TxConfig{}, ledger.Retention{})
	e.runs = runstore.New(e.fs)
	if o.cloudRun.Backoff == 0 {
		o.cloudRun.Backoff = time.Millisecond
	}
	var exec executor.Executor = cloudrun.New(client, o.cloudRun)
	if o.wrap != nil {
		exec = o.wrap(exec)
	}
	cfg := o.cfg
	cfg.Provider = ledger.ProviderCloudRun
	cfg = cfg.WithDefaults()
	log := logging.Discard()
	if o.logs != nil {
		log = logging.New(o.logs, slog.LevelInfo)
	}
	var guard executionsync.TargetJudge
	if o.guard != nil {
		guard = blindguard.New(targetstore.New(e.fs, ledger.Retention{}), *o.guard, log)
	}
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: e.store, Executor: exec, Kind: executionsync.CloudRun, Now: e.clock.Now, LostGrace: cfg.LostGrace, Log: log, Guard: guard})
	wf, err := executionsync.New(e.store, exec, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, e.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.engine = workflow.NewEngine(workflow.Options{Runs: e.runs, Now: e.clock.Now, Log: log}, wf.Definition(executionsync.CloudRun))
	e.exec, e.syncer, e.log = exec, syncer, log
	return e
}

// row describes one seeded runner execution.
type row struct {
	org        string
	provider   string
	observedAt time.Time
	ref        any // provider_ref as written; a map, nil, or something malformed
	active     bool
	status     string
	exec       func(name string, at time.Time) *runpb.Execution // nil: Cloud Run does not know it
}

// put seeds a row and its execution, and returns the row's uuid.
func (e *env) put(r row) string {
	e.t.Helper()
	id := uuid.NewString()
	name := cloudrunfake.ExecutionName("p", "europe-west1", "job", "exec-"+id[:8])
	doc := map[string]any{
		"organization_uuid": firstNonEmpty(r.org, e.org),
		"runner_group_uuid": "group-1",
		"provider":          firstNonEmpty(r.provider, ledger.ProviderCloudRun),
		"status":            firstNonEmpty(r.status, ledger.StatusRunning),
		"active":            r.active,
		"observed_at":       r.observedAt,
	}
	switch ref := r.ref.(type) {
	case nil:
		doc["provider_ref"] = map[string]any{"execution": name}
	case string:
		if ref != "absent" {
			doc["provider_ref"] = ref // malformed: not a map
		}
	default:
		doc["provider_ref"] = ref
	}
	if r.exec != nil {
		if err := e.fake.SetExecution(r.exec(name, r.observedAt.Add(-time.Minute))); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(context.Background(), doc); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// stale is a row of e.org not observed for ten minutes.
func (e *env) stale(exec func(string, time.Time) *runpb.Execution) string {
	return e.put(row{observedAt: e.clock.Now().Add(-10 * time.Minute), active: true, exec: exec})
}

func (e *env) get(id string) ledger.Execution {
	e.t.Helper()
	r, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// start runs the workflow for input (organization defaults to e.org).
func (e *env) start(input map[string]any) workflow.Outcome {
	e.t.Helper()
	out, err := e.try(input)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return out
}

func (e *env) try(input map[string]any) (workflow.Outcome, error) {
	if _, ok := input["organization_uuid"]; !ok {
		input["organization_uuid"] = e.org
	}
	raw, _ := json.Marshal(input)
	return e.engine.Start(context.Background(), workflow.Request{
		Type: contract.ExecutionSyncCloudRun, InitialData: raw, Trigger: workflow.TriggerLocal, Actor: "test",
	})
}

// outputOf decodes a run's output and stats.
func outputOf(t *testing.T, out workflow.Outcome) (executionsync.Output, executionsync.Stats) {
	t.Helper()
	o, s := testenv.DecodeRun[executionsync.Output, executionsync.Stats](t, out.Output, out.Stats)
	if got := o.StartedCount + o.SkippedMissingMetadataCount + o.FailedStartCount; got != o.CandidateCount {
		t.Errorf("counts do not add up: started %d + skipped %d + failed %d != candidates %d",
			o.StartedCount, o.SkippedMissingMetadataCount, o.FailedStartCount, o.CandidateCount)
	}
	if len(o.StartedRunnerExecutionUUIDs) != o.StartedCount || len(o.FailedRunnerExecutionUUIDs) != o.FailedStartCount {
		t.Errorf("uuid lists disagree with their counts: %d/%d started, %d/%d failed",
			len(o.StartedRunnerExecutionUUIDs), o.StartedCount, len(o.FailedRunnerExecutionUUIDs), o.FailedStartCount)
	}
	return o, s
}

// executionWrites counts, per runner execution id, the committed writes that touch field.
func (e *env) executionWrites(field string) map[string]int {
	out := map[string]int{}
	for doc, n := range e.spy.WritesTouching(field) {
		if strings.Contains(doc, "/"+ledger.ExecutionsCollection+"/") {
			out[fsspy.DocID(doc)] += n
		}
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// staleRows writes n stale rows (stale) whose executions exec builds, and returns their ids.
func (e *env) staleRows(n int, exec func(string, time.Time) *runpb.Execution) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e.stale(exec)
	}
	return out
}

func succeeded(name string, at time.Time) *runpb.Execution { return cloudrunfake.Succeeded(name, at) }
func failed(name string, at time.Time) *runpb.Execution {
	return cloudrunfake.Failed(name, at, runpb.Condition_NON_ZERO_EXIT_CODE)
}
func cancelled(name string, at time.Time) *runpb.Execution { return cloudrunfake.Cancelled(name, at) }
func running(name string, at time.Time) *runpb.Execution   { return cloudrunfake.Running(name, at) }

// messageSyncer records a reconciling run of e.org and returns its uuid with a syncer of its own
// (its own Cloud Run client, an hour's lost grace, no guard): the Pub/Sub path's SyncExecution.
func (e *env) messageSyncer() (string, *executionsync.Syncer) {
	e.t.Helper()
	ctx := context.Background()
	run := "run-" + uuid.NewString()
	now := e.clock.Now().UTC()
	if err := e.runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: run, WorkflowType: string(contract.ExecutionSyncCloudRun),
		Status: workflow.StateReconciling, InitialData: map[string]any{"organization_uuid": e.org}, InitiatedAt: now, UpdatedAt: now}); err != nil {
		e.t.Fatal(err)
	}
	client, err := cloudrun.Dial(ctx, e.fake.Addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { client.Close() })
	return run, executionsync.NewSyncer(executionsync.SyncerConfig{Store: e.store, Executor: cloudrun.New(client, cloudrun.Config{}), Kind: executionsync.CloudRun, Now: e.clock.Now, LostGrace: time.Hour})
}
