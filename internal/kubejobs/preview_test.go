package kubejobs

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// A dry run of the Kubernetes workflow over the dataset of its real-run test (the fake
// clientset) decides each row as the real run then does, and writes nothing: no committed write,
// no read-write transaction. Past the grace, it reports the lost settlements the real run makes.
func TestKubernetesDryRunDecidesAsTheRealRunThenDoesAndWritesNothing(t *testing.T) {
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	clock := testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	a, cs := adapter(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	var ids []string
	put := func(provider string, r map[string]any) {
		id := uuid.NewString()
		if err := writer.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: provider, ProviderRef: r,
			Status: ledger.StatusRunning, Active: true, ObservedAt: clock.Now().Add(-10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, j := range []*batchv1.Job{succeededJob("build-1"), failedJob("build-2"), finishingSuccess("build-3"),
		finishingFailure("build-4"), suspendedJob("build-5"), retryingJob("build-6")} {
		if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, j, metaCreate); err != nil {
			t.Fatal(err)
		}
		put(ledger.ProviderKubernetes, ref(j))
	}
	put(ledger.ProviderKubernetes, ref(runningJob("build-7"))) // deleted
	put(ledger.ProviderKubernetes, map[string]any{"cluster": "eu", "namespace": "runners", "job": "build-1"})
	put(ledger.ProviderCloudRun, map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"})

	cfg := executionsync.Config{Provider: ledger.ProviderKubernetes, LostGrace: 15 * time.Minute}.WithDefaults()
	syncer := executionsync.NewSyncer(store, a, contract.ExecutionSyncKubernetes, ledger.ProviderKubernetes, clock.Now, cfg.LostGrace, logging.Discard(), nil)
	wf, err := executionsync.New(store, a, &executionsync.Inline{Syncer: syncer, Concurrency: 4}, cfg, clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: clock.Now, Log: logging.Discard()},
		wf.Definition(executionsync.Kubernetes))
	start := func(dry bool) executionsync.Stats {
		t.Helper()
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncKubernetes,
			InitialData: json.RawMessage(`{"organization_uuid": "` + org + `"}`), Trigger: workflow.TriggerLocal, DryRun: dry})
		if err != nil || out.Status != workflow.StateCompleted || out.DryRun != dry {
			t.Fatalf("run (dry %t): %v %v", dry, out.Err, err)
		}
		var s executionsync.Stats
		testenv.Decode(t, out.Stats, &s)
		return s
	}
	rows := func() map[string]ledger.Execution {
		out := map[string]ledger.Execution{}
		for _, id := range ids {
			r, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out[id] = r
		}
		return out
	}

	for round, wantSettle := range []map[string]int{{"succeeded": 1, "failed": 1}, {"lost": 1}} {
		if round == 1 {
			clock.Advance(16 * time.Minute)
		}
		before := rows()
		spy.Reset()
		p := start(true).Preview
		if rw, ro := spy.Transactions(); len(spy.Writes()) != 0 || rw != 0 || ro == 0 {
			t.Errorf("round %d: the dry run wrote %d documents in %d read-write transactions (%d read-only)", round, len(spy.Writes()), rw, ro)
		}
		if p == nil || !maps.Equal(p.WouldSettle, wantSettle) {
			t.Fatalf("round %d: preview %+v, want to settle %v", round, p, wantSettle)
		}
		s := start(false)
		if !maps.Equal(p.WouldSettle, s.Settled) || p.WouldRefresh != s.Refreshed || p.WouldStayUnknown != s.Unknown || p.SkippedMissingMetadata != len(s.Skipped) {
			t.Errorf("round %d: preview %+v, real run %+v", round, p, s)
		}
		after := rows()
		for _, row := range p.Rows {
			b, a := before[row.RunnerExecutionUUID], after[row.RunnerExecutionUUID]
			var ok bool
			switch row.Verdict {
			case executionsync.VerdictSettle:
				ok = !a.Active && a.Outcome == row.Outcome && a.Settlement != nil && a.Settlement.Reason == row.Rule
			case executionsync.VerdictRefresh:
				ok = a.Active && a.ObservedAt.After(b.ObservedAt)
			case executionsync.VerdictUnknown:
				ok = a.Active && !a.Sync.UnknownSince.IsZero() && a.Sync.Attempts == b.Sync.Attempts+1
			case executionsync.VerdictSkip:
				ok = a.Sync.Attempts == b.Sync.Attempts
			}
			if !ok {
				t.Errorf("round %d: row %s: preview %+v, the real run left %+v", round, row.RunnerExecutionUUID, row, a)
			}
		}
	}
}
