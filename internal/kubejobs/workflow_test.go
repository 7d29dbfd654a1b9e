package kubejobs

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/seeds"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The Kubernetes execution-sync workflow end to end: the Firestore emulator, the fake
// clientset, and the same workflow body the Cloud Run one uses.
func TestKubernetesWorkflowSettlesEveryCase(t *testing.T) {
	fs := testenv.Firestore(t)
	clock := testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	jobs := map[string]*batchv1.Job{
		"succeeded": succeededJob("build-1"), "failed": failedJob("build-2"), "finishing-ok": finishingSuccess("build-3"),
		"finishing-bad": finishingFailure("build-4"), "suspended": suspendedJob("build-5"), "retrying": retryingJob("build-6"),
	}
	a, cs := adapter(t)
	for _, j := range jobs {
		if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, j, metaCreate); err != nil {
			t.Fatal(err)
		}
	}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	old := clock.Now().Add(-10 * time.Minute)
	rows := map[string]string{}
	put := func(name string, provider string, r map[string]any) string {
		id := uuid.NewString()
		if err := writer.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: provider, ProviderRef: r,
			Status: ledger.StatusRunning, Active: true, ObservedAt: old}); err != nil {
			t.Fatal(err)
		}
		rows[name] = id
		return id
	}
	for name, j := range jobs {
		put(name, ledger.ProviderKubernetes, ref(j))
	}
	put("deleted", ledger.ProviderKubernetes, ref(runningJob("build-7")))
	recreated := ref(runningJob("build-6"))
	recreated["uid"] = "uid-of-the-first-build-6"
	put("other-uid", ledger.ProviderKubernetes, recreated)
	put("no-uid", ledger.ProviderKubernetes, map[string]any{"cluster": "eu", "namespace": "runners", "job": "build-1"})
	put("cloud-run", ledger.ProviderCloudRun, map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"})
	// A row a foreign writer got wrong (its status a number), among the stale ones: named, skipped.
	malformed := put("malformed", ledger.ProviderKubernetes, ref(runningJob("build-1")))
	corrupted, err := fs.Collection(ledger.ExecutionsCollection).Doc(malformed).Update(ctx, []firestore.Update{{Path: "status", Value: 7}})
	if err != nil {
		t.Fatal(err)
	}

	engine := syncEngine(t, fs, store, a, clock.Now, 15*time.Minute, 4)
	start := func() (workflow.Outcome, executionsync.Stats) {
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncKubernetes,
			InitialData: json.RawMessage(`{"organization_uuid": "` + org + `"}`), Trigger: workflow.TriggerLocal})
		if err != nil || out.Status != workflow.StateCompleted {
			t.Fatalf("run: %v %v", out.Err, err)
		}
		var s executionsync.Stats
		testenv.Decode(t, out.Stats, &s)
		return out, s
	}

	out, stats := start()
	if out.Output["candidate_count"] != int64(10) || out.Output["started_count"] != int64(8) || out.Output["skipped_missing_metadata_count"] != int64(2) {
		t.Errorf("output = %v", out.Output)
	}
	if stats.Malformed == nil || stats.Malformed.Count != 1 || !slices.Equal(stats.Malformed.Sample, []string{ledger.ExecutionsCollection + "/" + malformed}) {
		t.Errorf("stats.malformed = %+v, want the malformed row %s", stats.Malformed, malformed)
	}
	if stats.Settled["succeeded"] != 1 || stats.Settled["failed"] != 1 || stats.Refreshed != 4 || stats.Unknown != 2 {
		t.Errorf("stats = %+v", stats)
	}
	get := func(name string) ledger.Execution {
		r, err := store.Get(ctx, rows[name])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := get("succeeded"); r.Active || r.Outcome != "succeeded" || !r.CompletedAt.Equal(finished) || r.Settlement.Evidence["source"] != "kubernetes" {
		t.Errorf("succeeded row = %+v", r)
	}
	if r := get("failed"); r.Active || r.Outcome != "failed" || !strings.Contains(r.FailureReason, "BackoffLimitExceeded") || !r.CompletedAt.Equal(finished) {
		t.Errorf("failed row = %+v", r)
	}
	if r := get("finishing-ok"); !r.Active || r.Sync.PendingOutcome != "succeeded" || !r.ObservedAt.Equal(clock.Now()) {
		t.Errorf("finishing row = %+v", r)
	}
	if r := get("finishing-bad"); !r.Active || r.Sync.PendingOutcome != "failed" {
		t.Errorf("failing row = %+v", r)
	}
	for _, name := range []string{"suspended", "retrying"} {
		if r := get(name); !r.Active || r.Sync.LastVerdict != "running" || r.Sync.PendingOutcome != "" {
			t.Errorf("%s row = %+v", name, r)
		}
	}
	for _, name := range []string{"deleted", "other-uid"} {
		if r := get(name); !r.Active || !r.Sync.UnknownSince.Equal(clock.Now()) {
			t.Errorf("%s row = %+v", name, r)
		}
	}
	if snap, err := fs.Collection(ledger.ExecutionsCollection).Doc(malformed).Get(ctx); err != nil || !snap.UpdateTime.Equal(corrupted.UpdateTime) {
		t.Errorf("the malformed row was written: %v %v", snap.Data(), err)
	}
	if r := get("cloud-run"); r.Sync.Attempts != 0 {
		t.Errorf("the Kubernetes workflow touched a Cloud Run row: %+v", r)
	}
	seed := seeds.OutputFields(t, "002_f9ac2157cfe43671.txt")
	for k := range out.Output {
		if !seed[k] {
			t.Errorf("output field %s is not in seed 002", k)
		}
	}

	// The finishing Job completes; the failing one is deleted before it reaches Failed, its
	// FailureTarget already said how it ends; past the grace the deleted and replaced ones are lost.
	done := succeededJob("build-3")
	if _, err := cs.BatchV1().Jobs("runners").UpdateStatus(ctx, done, metaUpdate); err != nil {
		t.Fatal(err)
	}
	if err := cs.BatchV1().Jobs("runners").Delete(ctx, "build-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(16 * time.Minute)
	_, stats = start()
	if stats.Settled["succeeded"] != 1 || stats.Settled["lost"] != 2 || stats.Settled["failed"] != 1 {
		t.Errorf("second run stats = %+v", stats)
	}
	if r := get("finishing-ok"); r.Active || r.Outcome != "succeeded" || r.Sync.PendingOutcome != "" {
		t.Errorf("the finished row = %+v", r)
	}
	if r := get("finishing-bad"); r.Active || r.Outcome != "failed" || r.Settlement.Reason != executionsync.ReasonDecidedThenGone ||
		r.Settlement.Evidence["pending_outcome"] != "failed" || r.Settlement.Evidence["error"] != "not_found" {
		t.Errorf("the row of the Job deleted after FailureTarget = outcome %q settlement %+v, want failed by %s", r.Outcome, r.Settlement, executionsync.ReasonDecidedThenGone)
	}
}

// syncEngine wires the Kubernetes execution sync on a as the app does inline — concurrency
// workers, lostGrace (0: the default) — with its run records in fs.
func syncEngine(t *testing.T, fs *firestore.Client, store *ledger.ExecutionStore, a executor.Executor, now func() time.Time, lostGrace time.Duration, concurrency int) *workflow.Engine {
	t.Helper()
	cfg := executionsync.Config{Provider: ledger.ProviderKubernetes, LostGrace: lostGrace}.WithDefaults()
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: a, Kind: executionsync.Kubernetes, Now: now, LostGrace: cfg.LostGrace})
	wf, err := executionsync.New(store, a, &executionsync.Inline{Syncer: syncer, Concurrency: concurrency}, cfg, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	return workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: now, Log: logging.Discard()}, wf.Definition(executionsync.Kubernetes))
}
