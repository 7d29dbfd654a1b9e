package executionsync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// demoFleet seeds the demo's 240-row dataset (internal/demo: 60 succeeded, 40 failed, 20
// cancelled, 40 still running, 20 unknown to Cloud Run, 20 without a usable reference, 40
// fresh), the unknown ones split between within and past the lost grace, and beside it the rows
// no run of this organization's Cloud Run workflow settles: already settled, another
// organization's (swept by its own run), one of an organization that opted out (whose runs are
// refused), a Kubernetes row, one whose observed_at is not a timestamp, one that does not decode.
// It returns every row's id and the organization that opted out.
func demoFleet(e *env) ([]string, string) {
	e.t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	var ids []string
	n := 0
	add := func(org string, observedAt time.Time, ref map[string]any, exec *runpb.Execution, unknownSince time.Time) {
		n++
		r := ledger.Execution{UUID: uuid.NewString(), OrganizationUUID: org, Provider: ledger.ProviderCloudRun, ProviderRef: ref,
			Status: ledger.StatusRunning, Active: true, ObservedAt: observedAt.Truncate(time.Microsecond)}
		r.Sync.UnknownSince = unknownSince
		if n%7 == 0 {
			r.Status = ledger.StatusPending
		}
		if exec != nil {
			if err := e.fake.SetExecution(exec); err != nil {
				e.t.Fatal(err)
			}
		}
		if err := (ledgertest.Executions{Client: e.fs}).Put(ctx, r); err != nil {
			e.t.Fatal(err)
		}
		ids = append(ids, r.UUID)
	}
	name := func(job string, i int) string {
		return cloudrunfake.ExecutionName("demo-project", "europe-west1", job, fmt.Sprintf("%s-%05d", job, i))
	}
	ref := func(x string) map[string]any { return map[string]any{"execution": x} }
	stale := func(i int) time.Time { return now.Add(-time.Duration(5+i%115) * time.Minute) }
	done := func(i int) time.Time { return stale(i).Add(-time.Minute) }
	for i := range 60 {
		x := name("nightly-build", i)
		add(e.org, stale(i), ref(x), cloudrunfake.Succeeded(x, done(i)), time.Time{})
	}
	for i := range 40 {
		x := name("integration-tests", i)
		add(e.org, stale(i), ref(x), cloudrunfake.Failed(x, done(i), runpb.Condition_NON_ZERO_EXIT_CODE), time.Time{})
	}
	for i := range 20 {
		x := name("deploy-canary", i)
		add(e.org, stale(i), ref(x), cloudrunfake.Cancelled(x, done(i)), time.Time{})
	}
	for i := range 40 {
		x := name("data-backfill", i)
		exec := []func(string, time.Time) *runpb.Execution{cloudrunfake.Running, cloudrunfake.Reconciling, cloudrunfake.Pending, cloudrunfake.Cancelling}[i%4]
		add(e.org, stale(i), ref(x), exec(x, stale(i)), time.Time{})
	}
	for i := range 20 {
		since := time.Time{} // unknown for the first time now
		if i%2 == 0 {
			since = now.Add(-20 * time.Minute) // past the 15-minute grace
		}
		add(e.org, stale(i), ref(name("aged-out", i)), nil, since)
	}
	for i := range 20 {
		add(e.org, stale(i), []map[string]any{nil, {}, {"execution": "not-a-resource-name"}}[i%3], nil, time.Time{})
	}
	for i := range 40 {
		x := name("fresh", i)
		add(e.org, now.Add(-time.Duration(i%50)*time.Second), ref(x), cloudrunfake.Running(x, now), time.Time{})
	}
	old := now.Add(-10 * time.Minute)
	ids = append(ids,
		e.put(row{observedAt: old, active: false, status: ledger.StatusSucceeded, exec: failed}),
		e.put(row{org: e.other, observedAt: old, active: true, exec: succeeded}),
		e.put(row{observedAt: old, active: true, provider: ledger.ProviderKubernetes, exec: succeeded}),
		e.put(row{observedAt: old, active: true, ref: "not-a-map"}),
	)
	optedOut := uuid.NewString()
	if err := (ledgertest.Organizations{Client: e.fs}).Put(ctx, ledger.Organization{UUID: optedOut, SweepsEnabled: false}); err != nil {
		e.t.Fatal(err)
	}
	ids = append(ids, e.put(row{org: optedOut, observedAt: old, active: true, exec: succeeded}))
	invisible := uuid.NewString()
	if _, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(invisible).Set(ctx, map[string]any{
		"organization_uuid": e.org, "provider": ledger.ProviderCloudRun, "status": "running", "active": true,
		"observed_at": "yesterday", "provider_ref": ref(name("invisible", 0)),
	}); err != nil {
		e.t.Fatal(err)
	}
	return append(ids, invisible), optedOut
}

// For every row of the demo's dataset, explain's verdict is what the next real run then does to
// it: settled with the outcome and reason it named, refreshed, kept unknown, or left alone; and
// explaining writes nothing.
func TestExplainAgreesWithTheNextRunOnEveryRowOfTheDemoDataset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: 15 * time.Minute}, guard: &blindguard.Config{}})
	ids, optedOut := demoFleet(e)
	wf, err := executionsync.New(e.store, e.exec, &executionsync.Inline{Syncer: e.syncer, Concurrency: 4},
		executionsync.Config{Provider: ledger.ProviderCloudRun, LostGrace: 15 * time.Minute}, e.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(ids)
	e.spy.Reset()
	said := map[string]explain.Explanation{}
	verdicts := map[string]int{}
	for _, id := range ids {
		x, err := wf.Explain(context.Background(), id, explain.Options{})
		if err != nil {
			t.Fatalf("explain %s: %v", id, err)
		}
		said[id] = x
		verdicts[x.Verdict+" "+x.Outcome+" "+x.Rule]++
	}
	if rw, _ := e.spy.Transactions(); rw != 0 || len(e.spy.Writes()) != 0 {
		t.Fatalf("explaining began %d read-write transactions and wrote %d documents", rw, len(e.spy.Writes()))
	}
	t.Logf("explain's verdicts: %v", verdicts)

	for _, org := range []string{e.org, e.other} {
		if out := e.start(map[string]any{"organization_uuid": org, "limit": 200}); out.Status != workflow.StateCompleted {
			t.Fatalf("run of %s: %s %v", org, out.Status, out.Err)
		}
	}
	// The app's engine refuses a run of an organization that opted out; this one has no opt-out
	// check, so the run goes on and the row's own transaction refuses it.
	if _, s := outputOf(t, e.start(map[string]any{"organization_uuid": optedOut, "limit": 200})); s.Refused[executionsync.RefuseDisabled] != 1 {
		t.Errorf("a run of the organization that opted out: stats %+v, want its row refused", s)
	}
	after := e.snapshot(ids)
	for _, id := range ids {
		x, b, a := said[id], before[id], after[id]
		wrote := a.Sync.Attempts != b.Sync.Attempts
		var ok bool
		switch x.Verdict {
		case executionsync.VerdictSettle:
			ok = !a.Active && a.Outcome == x.Outcome && a.Settlement != nil && a.Settlement.Reason == x.Rule
		case executionsync.VerdictRefresh:
			ok = a.Active && a.ObservedAt.After(b.ObservedAt) && a.Sync.LastVerdict == "running"
		case executionsync.VerdictUnknown:
			ok = a.Active && wrote && !a.Sync.UnknownSince.IsZero() && a.Settlement == nil
		case executionsync.VerdictSkip:
			ok = !wrote && a.ObservedAt.Equal(b.ObservedAt) && a.Active == b.Active
		default:
			ok = false
		}
		if !ok {
			t.Errorf("row %s: explain said %s %s (%s), the next run left it %+v (was %+v)", id, x.Verdict, x.Outcome, x.Rule, a, b)
		}
	}
	want := map[string]int{
		"settle succeeded executor_terminal": 61, // and the other organization's
		"settle failed executor_terminal":    40,
		"settle cancelled executor_terminal": 20,
		"settle lost executor_lost":          10,
		"refresh  executor_running":          40,
		"unknown  lost_grace":                10,
		"skip  missing_metadata":             21, // and the row that does not decode
		"skip  younger_than_min_age":         40,
		"skip  not_active":                   1,
		"skip  provider_mismatch":            1,
		"skip  observed_at_invalid":          1,
		"skip  organization_disabled":        1,
	}
	for k, n := range want {
		if verdicts[k] != n {
			t.Errorf("explain gave %q to %d rows, want %d (all: %v)", k, verdicts[k], n, verdicts)
		}
	}
}

// Explain names what it checked, what the executor said, and what stalesweep recorded; without
// the executor it does not ask; a row that does not exist is ErrNoRow.
func TestExplainSaysWhyAndWhatItAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id := e.stale(failed)
	wf, err := executionsync.New(e.store, e.exec, &executionsync.Inline{Syncer: e.syncer, Concurrency: 1},
		executionsync.Config{Provider: ledger.ProviderCloudRun}, e.clock.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := e.fake.Calls(cloudrunfake.GetExecution)
	x, err := wf.Explain(context.Background(), id, explain.Options{NoExecutor: true})
	if err != nil || x.Executor != nil || x.Verdict != executionsync.VerdictUnknown || x.Rule != executionsync.RuleExecutorNotAsked || !x.Visible ||
		e.fake.Calls(cloudrunfake.GetExecution) != calls {
		t.Errorf("without the executor: %+v %v (calls %d→%d)", x, err, calls, e.fake.Calls(cloudrunfake.GetExecution))
	}
	x, err = wf.Explain(context.Background(), id, explain.Options{})
	if err != nil || x.Executor == nil || x.Executor.Verdict != "failed" || x.Executor.Target == "" || x.Verdict != executionsync.VerdictSettle ||
		x.Outcome != "failed" || x.Rule != executionsync.ReasonExecutorTerminal || x.WorkflowType != string(contract.ExecutionSyncCloudRun) ||
		x.Scope != e.org || x.Row["organization_uuid"] != e.org || len(x.Checks) < 6 {
		t.Errorf("with the executor: %+v %v", x, err)
	}
	e.start(map[string]any{})
	x, err = wf.Explain(context.Background(), id, explain.Options{})
	if err != nil || x.Visible || x.Verdict != executionsync.VerdictSkip || x.Rule != executionsync.WhyNotActive || x.Last["settlement"] == nil || x.Last["outcome"] != "failed" {
		t.Errorf("once settled: %+v %v", x, err)
	}
	if _, err := wf.Explain(context.Background(), uuid.NewString(), explain.Options{}); !errors.Is(err, executionsync.ErrNoRow) {
		t.Errorf("a missing row: %v, want ErrNoRow", err)
	}
}
