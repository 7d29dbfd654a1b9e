package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logsink"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// The demo and one staged incident of each other kind log every event of the alerts list, each
// line with every field its metric extracts and at a severity its metric counts; every line
// that names a listed event is counted by a metric. The metrics of terraform/alerts.tf.json are
// generated from the same list, so what they count is what the code logs.
func TestTheDemoAndItsIncidentsLogEveryListedEvent(t *testing.T) {
	testenv.Need(t, testenv.FirestoreEmulator)
	logs := &logsink.Sink{}
	log := logging.New(logs, slog.LevelDebug)
	var out bytes.Buffer
	res, err := Run(context.Background(), Options{Out: &out, Log: log, LostGrace: time.Second, Pause: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	stormGuardTrip(t, log)
	blindTarget(t, log)
	dispatchIncidents(t, log)

	lines := logs.Lines(t)
	counted := map[string]int{}
	settled, abandoned := map[string]int{}, map[string]int{}
	for _, line := range lines {
		event, named := line[alerts.Key]
		n := 0
		for _, m := range alerts.Metrics {
			ok, missing := m.Matches(line)
			if !ok {
				continue
			}
			n++
			counted[m.Name]++
			if len(missing) > 0 {
				t.Errorf("metric %s counts a line that lacks %v: %v", m.Name, missing, line)
			}
		}
		if named && n == 0 {
			t.Errorf("a line names event %v but no metric counts it (severity %v?): %v", event, line["severity"], line)
		}
		if event == string(alerts.RowSettled) {
			switch line["workflow_type"] {
			case string(contract.ExecutionSyncCloudRun):
				settled[fmt.Sprint(line["outcome"])]++
			case string(contract.ExtensionRunsSweep):
				abandoned[fmt.Sprint(line["outcome"])]++
			}
		}
	}
	for _, m := range alerts.Metrics {
		if counted[m.Name] == 0 {
			t.Errorf("no line of event %s is counted by metric %s", m.Event, m.Name)
		}
	}
	// Each settled row is one row_settled line, with its outcome.
	for outcome, n := range res.Settled {
		if settled[outcome] != n {
			t.Errorf("%d row_settled lines say outcome %s, the demo settled %d", settled[outcome], outcome, n)
		}
	}
	if len(settled) != len(res.Settled) {
		t.Errorf("row_settled outcomes %v, the demo settled %v", settled, res.Settled)
	}
	if abandoned[ledger.OutcomeAbandoned] != 12 || len(abandoned) != 1 {
		t.Errorf("the overridden fleet sweep logged row_settled outcomes %v, want abandoned 12", abandoned)
	}
	t.Logf("%d lines; counted by metric: %v", len(lines), counted)
}

// stormGuardTrip stages a fleet whose every running app invocation has been idle an hour: the
// scheduled sweep trips the storm guard and fails; the operator's override abandons them. One running invocation has no last_moved_at:
// no scan sees it, and the run reports it.
func stormGuardTrip(t *testing.T, log *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	then := now.Add(-time.Hour)
	idle := ledgertest.ExtensionRuns{Client: fs, Now: testenv.Fixed(then)}
	for i := range 12 {
		run := ledger.ExtensionRun{RunID: fmt.Sprintf("run-%02d", i), TenantID: "tenant", ExtensionID: fmt.Sprintf("ext-%02d", i), JobName: "job"}
		if err := idle.Start(ctx, run, then); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fs.Collection(ledger.ExtensionRunsCollection).Doc("run-unstamped").Set(ctx, map[string]any{
		"tenant_id": "tenant", "extension_id": "ext-x", "job_name": "job", "status": ledger.ExtensionRunning,
	}); err != nil {
		t.Fatal(err)
	}
	store := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
	wf := runssweep.New(store, runssweep.Config{}, ledgertest.LocalClock(testenv.Fixed(now)))
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: testenv.Fixed(now), Log: log}, wf.Definition())
	out, err := engine.Start(ctx, workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(`{"older_than_ms": 600000}`), Trigger: workflow.TriggerSchedule})
	if err != nil || out.Status != workflow.StateFailed || !errors.Is(out.Err, storm.ErrTripped) {
		t.Fatalf("sweep of an idle fleet: %+v %v, want failed by the storm guard", out, err)
	}
	// The operator checks, and overrides it from the command: the twelve are abandoned.
	out, err = engine.Start(ctx, workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(`{"older_than_ms": 600000}`),
		Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: true}, Actor: "ops@example.com"})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("overridden sweep: %+v %v", out, err)
	}
}

// blindTarget stages a Cloud Run target that knows none of the executions it runs: past the
// lost grace, the guard judges it blind and nothing is settled lost.
func blindTarget(t *testing.T, log *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	clock := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	_, client := cloudruntest.Start(t, cloudrunfake.WithClock(clock.Now))
	const grace = 15 * time.Minute
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	adapter := cloudrun.New(client, cloudrun.Config{Backoff: time.Millisecond})
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: adapter, Kind: executionsync.CloudRun, Now: clock.Now, LostGrace: grace, Log: log,
		Guard: blindguard.New(targetstore.New(fs, ledger.Retention{}), blindguard.Config{MinRows: 3}, log)})
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun, LostGrace: grace}.WithDefaults()
	wf, err := executionsync.New(store, adapter, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: clock.Now, Log: log}, wf.Definition(executionsync.CloudRun))
	var rows []string
	for range 4 {
		id := uuid.NewString()
		rows = append(rows, id)
		name := cloudrunfake.ExecutionName("blind", "europe-west1", "job", "e-"+id[:12])
		if err := writer.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: ledger.ProviderCloudRun,
			ProviderRef: map[string]any{"execution": name}, Status: ledger.StatusRunning, Active: true, ObservedAt: clock.Now().Add(-10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	input, _ := json.Marshal(map[string]any{"organization_uuid": org})
	sweep := func() {
		t.Helper()
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: input, Trigger: workflow.TriggerSchedule})
		if err != nil || out.Status != workflow.StateCompleted {
			t.Fatalf("sweep: %v %v", err, out.Err)
		}
	}
	sweep() // Cloud Run knows none of them: unknown
	clock.Advance(grace + 5*time.Minute)
	sweep() // past the grace: the target is judged blind
	for _, id := range rows {
		if r, err := store.Get(ctx, id); err != nil || r.Outcome == ledger.OutcomeLost {
			t.Fatalf("row %s of the blind target: %+v %v, want not settled lost", id, r, err)
		}
	}
}

// workflows is the dispatcher's view of the declared workflows.
type workflows map[contract.WorkflowType]workflow.Definition

func (w workflows) Definition(t contract.WorkflowType) (workflow.Definition, bool) {
	d, ok := w[t]
	return d, ok
}

// publisher is a pipeline.Publisher that acknowledges every message, or, when stalled, answers
// only once the dispatch's budget is spent.
type publisher struct{ stalled bool }

func (p publisher) PublishBatch(ctx context.Context, _ string, msgs []message.Outgoing) []pipeline.Result {
	out := make([]pipeline.Result, len(msgs))
	for i := range out {
		out[i].ID = fmt.Sprint(i)
	}
	if p.stalled {
		<-ctx.Done()
		for i := range out {
			out[i] = pipeline.Result{Err: ctx.Err()}
		}
	}
	return out
}

// dispatchIncidents stages a pm.sweep tick whose queues fill the dispatch's list limit, and one
// whose publishes stall past the dispatch's budget.
func dispatchIncidents(t *testing.T, log *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	defs := workflows{contract.PMSweep: pmsweep.New(nil, pmsweep.Config{}, nil).Definition()}
	queues := func(_ context.Context, limit int) ([]string, error) {
		return []string{"builds", "deploys"}[:min(limit, 2)], nil
	}
	tick := pipeline.Tick{WorkflowType: contract.PMSweep, InitialData: []byte(`{"ttl": 600}`), TickID: "tick-" + uuid.NewString()}

	dispatcher := func(pub pipeline.Publisher, cfg pipeline.DispatchConfig) *pipeline.Dispatcher {
		return pipeline.NewDispatcher(pipeline.DispatcherOptions{Orgs: orgadmin.New(fs), Publisher: pub, SweepsTopic: pipeline.SweepsDefault,
			Workflows: defs, Log: log, Config: cfg, ListQueues: queues})
	}
	capped := dispatcher(publisher{}, pipeline.DispatchConfig{ListMax: 2})
	if rep, err := capped.Dispatch(ctx, tick); err != nil || !rep.Capped {
		t.Fatalf("dispatch with the queues at the list limit: %+v %v, want capped", rep, err)
	}

	stalled := dispatcher(publisher{stalled: true}, pipeline.DispatchConfig{Budget: 100 * time.Millisecond})
	if rep, err := stalled.Dispatch(ctx, tick); err == nil || rep.Deferred != 2 {
		t.Fatalf("dispatch whose publishes outlast its budget: %+v %v, want 2 deferred and an error", rep, err)
	}
}
