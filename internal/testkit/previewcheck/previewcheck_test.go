package previewcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// plan is what one run did, or what a dry run says the run would do: each row touched, by id,
// with what happens to it (abandon, reclaim, poison, settle:OUTCOME, refresh, unknown).
type plan map[string]string

// world is one workflow wired on its own Firestore project, ready to start.
type world struct {
	t      *testing.T
	fs     *firestore.Client
	clock  *testenv.Clock
	engine *workflow.Engine
	typ    contract.WorkflowType
	input  string
}

func (w *world) start(dry bool) workflow.Outcome {
	w.t.Helper()
	out, err := w.engine.Start(context.Background(), workflow.Request{Type: w.typ, InitialData: json.RawMessage(w.input), Trigger: workflow.TriggerLocal, DryRun: dry})
	if err != nil || out.Status != workflow.StateCompleted || out.DryRun != dry {
		w.t.Fatalf("run (dry %t): %s %v %v", dry, out.Status, out.Err, err)
	}
	return out
}

func newWorld(t *testing.T, typ contract.WorkflowType, input string, def func(*world) workflow.Definition) *world {
	w := &world{t: t, fs: testenv.Firestore(t), clock: testenv.NewClock(epoch), typ: typ, input: input}
	w.engine = workflow.NewEngine(workflow.Options{Runs: runstore.New(w.fs), Now: w.clock.Now, Log: logging.Discard()}, def(w))
	return w
}

// previewed is the plan of an age-settled workflow's preview: its rows whose action settles.
func previewed(p *explain.Preview, actions map[string]string) plan {
	out := plan{}
	for _, r := range p.Rows {
		if a, ok := actions[r.Action]; ok {
			out[r.ID] = a
		}
	}
	return out
}

// abandoned is the plan of a real run whose output lists rows it abandoned, each named by id.
func abandoned[T any](rows []T, id func(T) string) plan {
	out := plan{}
	for _, r := range rows {
		out[id(r)] = "abandon"
	}
	return out
}

// Each workflow's dry run says in its output what its preview says, and the real run that
// follows does what the dry run predicted, row by row.
func TestEveryDryRunAgreesWithItsPreviewAndWithTheRunThatFollows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// seed writes the rows and returns the world; dry checks a dry run's output against its
		// preview and returns the preview's plan; real returns the plan the real run's output
		// (and its rows) says it carried out.
		seed func(t *testing.T) *world
		dry  func(t *testing.T, w *world, out workflow.Outcome) plan
		real func(t *testing.T, w *world, out workflow.Outcome) plan
	}{
		{name: "runs sweep", seed: seedRuns, dry: dryRuns, real: realRuns},
		{name: "pm.sweep", seed: seedTasks, dry: dryTasks, real: realTasks},
		{name: "lease settle", seed: seedLeases, dry: dryLeases, real: realLeases},
		{name: "cloud run sync", seed: seedCloudRun, dry: dryExecutions, real: realExecutions},
		{name: "kubernetes sync", seed: seedKubernetes, dry: dryExecutions, real: realExecutions},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := c.seed(t)
			predicted := c.dry(t, w, w.start(true))
			if len(predicted) == 0 {
				t.Fatal("the dry run predicts nothing: the data set does not exercise the workflow")
			}
			if got := c.real(t, w, w.start(false)); !maps.Equal(got, predicted) {
				t.Errorf("the real run did %v; its dry run predicted %v", got, predicted)
			}
		})
	}
}

// --- platform.extension.runs.sweep

func seedRuns(t *testing.T) *world {
	var store *ledger.ExtensionRunStore
	w := newWorld(t, contract.ExtensionRunsSweep, `{"older_than_ms": 600000}`, func(w *world) workflow.Definition {
		store = ledger.NewExtensionRunStore(w.fs, ledger.TxConfig{})
		return runssweep.New(store, runssweep.Config{}, ledgertest.LocalClock(w.clock.Now)).Definition()
	})
	for i, ago := range []time.Duration{time.Hour, 2 * time.Hour, time.Hour, time.Minute, 2 * time.Minute} {
		then := w.clock.Now().Add(-ago)
		writer := ledgertest.ExtensionRuns{Client: w.fs, Now: testenv.Fixed(then)}
		if err := writer.Start(context.Background(), ledger.ExtensionRun{RunID: fmt.Sprintf("run-%d", i), TenantID: "tenant", ExtensionID: fmt.Sprintf("ext-%d", i),
			JobName: "job", Background: i == 0}, then); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func dryRuns(t *testing.T, _ *world, out workflow.Outcome) plan {
	o, s := testenv.DecodeRun[runssweep.Output, runssweep.Stats](t, out.Output, out.Stats)
	p := previewed(s.Preview, map[string]string{"abandon": "abandon"})
	// The seed's output of a dry run sweeps nothing; the preview names what it would sweep.
	if o.Swept != 0 || len(o.Runs) != 0 || s.Preview.Counts["abandon"] != len(p) {
		t.Errorf("dry output swept %d %v, preview %v: want nothing swept, the preview counting its rows", o.Swept, o.Runs, s.Preview.Counts)
	}
	return p
}

func realRuns(t *testing.T, _ *world, out workflow.Outcome) plan {
	var o runssweep.Output
	testenv.Decode(t, out.Output, &o)
	p := abandoned(o.Runs, func(r runssweep.SweptRun) string { return r.RunID })
	if o.Swept != len(p) {
		t.Errorf("swept %d, runs listed %d", o.Swept, len(p))
	}
	return p
}

// --- pm.sweep

func seedTasks(t *testing.T) *world {
	var tasks *ledger.TaskStore
	w := newWorld(t, contract.PMSweep, `{"queue": "q", "ttl": 300, "reclaimer": "previewcheck"}`, func(w *world) workflow.Definition {
		tasks = ledger.NewTaskStore(w.fs, ledger.TxConfig{})
		return pmsweep.New(tasks, pmsweep.Config{MaxReclaims: 1}, ledgertest.LocalClock(w.clock.Now)).Definition()
	})
	worker := ledgertest.Tasks{Client: w.fs, Now: w.clock.Now}
	ctx := context.Background()
	claim := func(id string) {
		t.Helper()
		if err := worker.Enqueue(ctx, "q", id, "slug-"+id, w.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if l, err := worker.Next(ctx, "q", "worker-"+id, w.clock.Now()); err != nil || l.TaskID != id {
			t.Fatalf("claim %s: %+v %v", id, l, err)
		}
	}
	// poison is reclaimed once already (MaxReclaims 1: the next reclaim fails it); a and b are
	// silent; live has just been claimed.
	claim("poison")
	w.clock.Advance(10 * time.Minute)
	if _, _, err := pmsweep.New(tasks, pmsweep.Config{}, ledgertest.LocalClock(w.clock.Now)).RunOnce(ctx, pmsweep.Input{Queue: "q", TTL: 300, Reclaimer: "earlier"}, false, logging.Discard()); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Next(ctx, "q", "worker-again", w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	claim("a")
	claim("b")
	w.clock.Advance(10 * time.Minute)
	claim("live")
	return w
}

func dryTasks(t *testing.T, _ *world, out workflow.Outcome) plan {
	o, s := testenv.DecodeRun[pmsweep.Output, pmsweep.Stats](t, out.Output, out.Stats)
	p := previewed(s.Preview, map[string]string{"reclaim": "reclaim", "fail_as_poison": "poison"})
	// pm.sweep's dry-run output is the seed's: it lists what would be reclaimed, and poisoned.
	listed := tasksListed(o)
	if !o.DryRun || !maps.Equal(listed, p) {
		t.Errorf("dry output lists %v (dry_run %t), its preview %v", listed, o.DryRun, p)
	}
	return p
}

func realTasks(t *testing.T, _ *world, out workflow.Outcome) plan {
	var o pmsweep.Output
	testenv.Decode(t, out.Output, &o)
	return tasksListed(o)
}

// tasksListed is what a pm.sweep output lists: the tasks reclaimed, and those failed as poison.
func tasksListed(o pmsweep.Output) plan {
	p := plan{}
	for _, r := range o.Reclaimed {
		p[r.Task] = "reclaim"
	}
	for _, r := range o.Poisoned {
		p[r.Task] = "poison"
	}
	return p
}

// --- runner.workspace-lease-settle

func seedLeases(t *testing.T) *world {
	org, group := uuid.NewString(), uuid.NewString()
	var store *ledger.LeaseStore
	w := newWorld(t, contract.WorkspaceLeaseSettle, fmt.Sprintf(`{"organization_uuid": %q, "runner_group_uuid": %q}`, org, group), func(w *world) workflow.Definition {
		store = ledger.NewLeaseStore(w.fs, ledger.TxConfig{})
		return leasesettle.New(store, leasesettle.Config{}, ledgertest.LocalClock(w.clock.Now)).Definition()
	})
	runner := ledgertest.Leases{Client: w.fs, Now: w.clock.Now}
	ctx := context.Background()
	testenv.Enable(t, w.fs, org)
	if err := runner.PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 300}); err != nil {
		t.Fatal(err)
	}
	instance := func(status string) string {
		id := uuid.NewString()
		if err := runner.PutInstance(ctx, ledger.RunnerInstance{UUID: id, OrganizationUUID: org, RunnerGroupUUID: group, Status: status}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Two leases of a terminated holder, one whose holder is gone and heartbeat stale, and one
	// whose holder runs: four examined, three to abandon.
	for _, l := range []struct {
		holder string
		ago    time.Duration
	}{{instance(ledger.InstanceTerminated), time.Minute}, {instance(ledger.InstanceStopped), time.Minute}, {uuid.NewString(), time.Hour}, {instance(ledger.InstanceRunning), time.Hour}} {
		then := w.clock.Now().Add(-l.ago)
		writer := ledgertest.Leases{Client: w.fs, Now: testenv.Fixed(then)}
		id := uuid.NewString()
		if err := writer.Acquire(ctx, ledger.WorkspaceLease{UUID: id, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: "ws-" + id[:6], HolderUUID: l.holder}, then); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func dryLeases(t *testing.T, _ *world, out workflow.Outcome) plan {
	o, s := testenv.DecodeRun[leasesettle.Output, leasesettle.Stats](t, out.Output, out.Stats)
	p := previewed(s.Preview, map[string]string{"abandon": "abandon"})
	// A dry run settles nothing; its outcome and reason say what its preview would abandon.
	want := fmt.Sprintf("dry run: would abandon %d of %d active leases examined", len(p), o.Examined)
	if o.Settled != 0 || len(o.Settlements) != 0 || o.Outcome != leasesettle.OutcomeWouldSettle || !strings.HasPrefix(o.Reason, want) || s.Preview.Counts["abandon"] != len(p) {
		t.Errorf("dry output %+v, preview %v; want nothing settled, outcome %s, reason %q…", o, s.Preview.Counts, leasesettle.OutcomeWouldSettle, want)
	}
	return p
}

func realLeases(t *testing.T, _ *world, out workflow.Outcome) plan {
	var o leasesettle.Output
	testenv.Decode(t, out.Output, &o)
	p := abandoned(o.Settlements, func(s leasesettle.Settlement) string { return s.LeaseUUID })
	if o.Settled != len(p) || o.Outcome != leasesettle.OutcomeSettled {
		t.Errorf("real output %+v", o)
	}
	return p
}

// --- the execution syncs: Cloud Run and Kubernetes

// executionWorld wires an execution sync on exec, as the app does inline.
func executionWorld(t *testing.T, kind executionsync.Kind, exec executor.Executor) (*world, *ledger.ExecutionStore, string) {
	typ, provider := kind.Type, kind.Provider
	org := uuid.NewString()
	var store *ledger.ExecutionStore
	w := newWorld(t, typ, fmt.Sprintf(`{"organization_uuid": %q}`, org), func(w *world) workflow.Definition {
		store = ledger.NewExecutionStore(w.fs, ledger.TxConfig{}, ledger.Retention{})
		cfg := executionsync.Config{Provider: provider, LostGrace: 15 * time.Minute}.WithDefaults()
		syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: exec, Kind: kind, Now: w.clock.Now, LostGrace: cfg.LostGrace})
		wf, err := executionsync.New(store, exec, &executionsync.Inline{Syncer: syncer, Concurrency: 4}, cfg, w.clock.Now, nil)
		if err != nil {
			t.Fatal(err)
		}
		return wf.Definition(kind)
	})
	testenv.Enable(t, w.fs, org)
	return w, store, org
}

func putExecution(t *testing.T, w *world, store *ledger.ExecutionStore, org, provider string, ref map[string]any) {
	t.Helper()
	if err := (ledgertest.Executions{Client: w.fs}).Put(context.Background(), ledger.Execution{UUID: uuid.NewString(), OrganizationUUID: org, Provider: provider, ProviderRef: ref,
		Status: ledger.StatusRunning, Active: true, ObservedAt: w.clock.Now().Add(-10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
}

func seedCloudRun(t *testing.T) *world {
	fakeRun, client := cloudruntest.Start(t, cloudrunfake.WithClock(testenv.Fixed(epoch)), cloudrunfake.WithSeed(42))
	w, store, org := executionWorld(t, executionsync.CloudRun, cloudrun.New(client, cloudrun.Config{Backoff: time.Millisecond}))
	for i, build := range []func(string, time.Time) *runpb.Execution{cloudrunfake.Succeeded, cloudrunfake.Running, nil} {
		name := cloudrunfake.ExecutionName("p", "europe-west1", "job", fmt.Sprintf("exec-%d", i))
		if build != nil {
			if err := fakeRun.SetExecution(build(name, w.clock.Now().Add(-11*time.Minute))); err != nil {
				t.Fatal(err)
			}
		}
		putExecution(t, w, store, org, ledger.ProviderCloudRun, map[string]any{"execution": name})
	}
	putExecution(t, w, store, org, ledger.ProviderCloudRun, map[string]any{}) // no usable reference: skipped
	return w
}

func seedKubernetes(t *testing.T) *world {
	start := epoch.Add(-time.Hour)
	done := start.Add(7 * time.Minute)
	cond := func(c batchv1.JobConditionType, reason string, at time.Time) batchv1.JobCondition {
		return batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Time{Time: at}}
	}
	job := func(name string, mod func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "runners", UID: types.UID("uid-" + name), ResourceVersion: "7"},
			Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: start}}}
		mod(j)
		return j
	}
	one := int32(1)
	succeeded := job("build-done", func(j *batchv1.Job) {
		j.Status.Succeeded, j.Status.CompletionTime = 1, &metav1.Time{Time: done}
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", done.Add(-time.Second)), cond(batchv1.JobComplete, "CompletionsReached", done)}
	})
	running := job("build-live", func(j *batchv1.Job) { j.Status.Active, j.Status.Ready = 1, &one })
	cs := fake.NewClientset(succeeded, running)
	set := kubejobs.NewSet(kubejobs.SetConfig{Client: kubejobs.ClientConfig{Timeout: time.Second}, Ready: map[string]batchclient.BatchV1Interface{"eu": cs.BatchV1()}})
	w, store, org := executionWorld(t, executionsync.Kubernetes, kubejobs.New(set, kubejobs.Config{Backoff: time.Millisecond}))
	for _, name := range []string{"build-done", "build-live", "build-deleted"} {
		putExecution(t, w, store, org, ledger.ProviderKubernetes, map[string]any{"cluster": "eu", "namespace": "runners", "job": name, "uid": "uid-" + name})
	}
	putExecution(t, w, store, org, ledger.ProviderKubernetes, map[string]any{"cluster": "eu"}) // no job named: skipped
	return w
}

// executionPlan is a preview's rows as a plan.
func executionPlan(p *executionsync.Preview) plan {
	out := plan{}
	for _, r := range p.Rows {
		switch r.Verdict {
		case executionsync.VerdictSettle:
			out[r.RunnerExecutionUUID] = "settle:" + r.Outcome
		case executionsync.VerdictRefresh, executionsync.VerdictUnknown, executionsync.VerdictSkip:
			out[r.RunnerExecutionUUID] = r.Verdict
		}
	}
	return out
}

func dryExecutions(t *testing.T, _ *world, out workflow.Outcome) plan {
	o, s := testenv.DecodeRun[executionsync.Output, executionsync.Stats](t, out.Output, out.Stats)
	p := s.Preview
	if p == nil {
		t.Fatalf("no preview: %+v", out.Stats)
	}
	// The output's counts are the seed's; each row the preview sent to the executor is one the
	// output says was started, and each it skipped, skipped.
	synced := p.Errored + p.WouldRefresh + p.WouldStayUnknown
	for _, n := range p.WouldSettle {
		synced += n
	}
	for _, n := range p.Raced {
		synced += n
	}
	for _, n := range p.Refused {
		synced += n
	}
	if o.SkippedMissingMetadataCount != p.SkippedMissingMetadata || o.StartedCount != synced || o.CandidateCount != synced+p.SkippedMissingMetadata+o.FailedStartCount {
		t.Errorf("dry output %+v disagrees with its preview %+v", o, p)
	}
	return executionPlan(p)
}

// realExecutions reads what the real run did to each row it names: its output's started rows
// and the rows its stats count.
func realExecutions(t *testing.T, w *world, out workflow.Outcome) plan {
	o, s := testenv.DecodeRun[executionsync.Output, executionsync.Stats](t, out.Output, out.Stats)
	store := ledger.NewExecutionStore(w.fs, ledger.TxConfig{}, ledger.Retention{})
	p := plan{}
	for _, id := range o.StartedRunnerExecutionUUIDs {
		r, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !r.Active && r.Settlement != nil && r.Settlement.WorkflowRunUUID == out.RunUUID:
			p[id] = "settle:" + r.Outcome
		case r.Active && !r.Sync.UnknownSince.IsZero():
			p[id] = executionsync.VerdictUnknown
		case r.Active && r.ObservedAt.After(w.clock.Now().Add(-time.Minute)):
			p[id] = executionsync.VerdictRefresh
		default:
			p[id] = fmt.Sprintf("untold: %+v", r)
		}
	}
	for _, id := range s.Skipped {
		p[id] = executionsync.VerdictSkip
	}
	return p
}
