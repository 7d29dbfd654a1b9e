package executionsync_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/seeds"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestWorkflowSettlesEveryCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: 15 * time.Minute}})
	now := e.clock.Now()
	old := now.Add(-10 * time.Minute)

	succ := e.stale(succeeded)
	fail := e.stale(failed)
	canc := e.stale(cancelled)
	run := e.stale(running)
	reconciling := e.stale(cloudrunfake.Reconciling)
	pending := e.stale(cloudrunfake.Pending)
	cancelling := e.stale(cloudrunfake.Cancelling)
	notFound := e.stale(nil)
	noRef := e.put(row{observedAt: old, active: true, ref: "absent"})
	emptyRef := e.put(row{observedAt: old, active: true, ref: map[string]any{}})
	badName := e.put(row{observedAt: old, active: true, ref: map[string]any{"execution": "jobs/x"}})
	malformed := e.put(row{observedAt: old, active: true, ref: "not-a-map"})
	fresh := e.put(row{observedAt: now.Add(-30 * time.Second), active: true, exec: succeeded})
	settledAlready := e.put(row{observedAt: old, active: false, status: ledger.StatusSucceeded, exec: failed})
	kubernetes := e.put(row{observedAt: old, active: true, provider: ledger.ProviderKubernetes, exec: succeeded})
	otherOrg := e.put(row{org: e.other, observedAt: old, active: true, exec: succeeded})
	e.spy.Reset()

	out := e.start(map[string]any{"limit": 200})
	if out.Status != workflow.StateCompleted {
		t.Fatalf("run %s: %v", out.Status, out.Err)
	}
	o, s := outputOf(t, out)
	wantStarted := []string{succ, fail, canc, run, reconciling, pending, cancelling, notFound}
	if o.CandidateCount != 12 || o.StartedCount != 8 || o.SkippedMissingMetadataCount != 4 || o.FailedStartCount != 0 {
		t.Errorf("output = %+v, want 12 candidates, 8 started, 4 skipped, 0 failed", o)
	}
	if got := sorted(o.StartedRunnerExecutionUUIDs); !slices.Equal(got, sorted(wantStarted)) {
		t.Errorf("started uuids = %v, want %v", got, sorted(wantStarted))
	}
	if s.Settled["succeeded"] != 1 || s.Settled["failed"] != 1 || s.Settled["cancelled"] != 1 || s.Refreshed != 4 || s.Unknown != 1 {
		t.Errorf("stats = %+v", s)
	}
	if s.Malformed == nil || s.Malformed.Count != 1 || !slices.Equal(s.Malformed.Sample, []string{ledger.ExecutionsCollection + "/" + malformed}) {
		t.Errorf("stats.malformed = %+v, want the one malformed row by its path", s.Malformed)
	}
	if o.OrganizationUUID != e.org || o.Limit != 200 || o.MinAgeSeconds != 60 {
		t.Errorf("echoed input = %s/%d/%d", o.OrganizationUUID, o.Limit, o.MinAgeSeconds)
	}

	seedFields := seeds.OutputFields(t, "003_eca0697e95c909d8.txt")
	for k := range out.Output {
		if !seedFields[k] {
			t.Errorf("output field %q is not in seed 003's output", k)
		}
	}
	if out.Output["completed_at"] != now.Format(time.RFC3339Nano) {
		t.Errorf("completed_at = %v, want %s", out.Output["completed_at"], now.Format(time.RFC3339Nano))
	}

	finishedAt := old.Add(-time.Minute)
	for id, want := range map[string]struct{ status, outcome string }{
		succ: {"succeeded", "succeeded"}, fail: {"failed", "failed"}, canc: {"cancelled", "cancelled"},
	} {
		r := e.get(id)
		if r.Active || r.Status != want.status || r.Outcome != want.outcome || !r.CompletedAt.Equal(finishedAt) {
			t.Errorf("%s row: active=%t status=%s outcome=%s completed_at=%v, want %s/%s at %v", want.outcome, r.Active, r.Status, r.Outcome, r.CompletedAt, want.status, want.outcome, finishedAt)
		}
		st := r.Settlement
		if st == nil || st.WorkflowRunUUID != out.RunUUID || st.Reason != executionsync.ReasonExecutorTerminal || !st.At.Equal(now) {
			t.Fatalf("%s settlement = %+v", want.outcome, st)
		}
		ev := st.Evidence
		if ev["etag"] == "" || ev["log_uri"] == "" || ev["conditions"] == nil || ev["task_count"] != int64(1) {
			t.Errorf("%s evidence lacks the executor's snapshot: %v", want.outcome, ev)
		}
		if seen, _ := ev["row_observed_at"].(time.Time); !seen.Equal(old) {
			t.Errorf("%s evidence row_observed_at = %v, want %v", want.outcome, ev["row_observed_at"], old)
		}
		if r.Sync.LastVerdict != want.outcome || r.Sync.Attempts != 1 || !r.Sync.LastSyncedAt.Equal(now) {
			t.Errorf("%s sync = %+v", want.outcome, r.Sync)
		}
	}
	if r := e.get(fail); r.FailureReason == "" {
		t.Error("failed row has no failure_reason")
	}
	if r := e.get(succ); r.FailureReason != "" {
		t.Errorf("succeeded row has failure_reason %q", r.FailureReason)
	}
	for _, id := range []string{run, reconciling, pending, cancelling} {
		r := e.get(id)
		if !r.Active || r.Status != ledger.StatusRunning || !r.ObservedAt.Equal(now) || r.Sync.LastVerdict != "running" || r.Settlement != nil {
			t.Errorf("running row %s: active=%t observed_at=%v sync=%+v settlement=%v", id, r.Active, r.ObservedAt, r.Sync, r.Settlement)
		}
	}
	if r := e.get(notFound); !r.Active || !r.Sync.UnknownSince.Equal(now) || r.Sync.LastVerdict != "unknown" || !r.ObservedAt.Equal(old) {
		t.Errorf("not-found row after one run: active=%t sync=%+v observed_at=%v", r.Active, r.Sync, r.ObservedAt)
	}
	for _, id := range []string{noRef, emptyRef, badName, fresh, kubernetes} {
		if r := e.get(id); !r.Active || r.Sync.Attempts != 0 || r.Settlement != nil {
			t.Errorf("row %s was touched: %+v", id, r)
		}
	}
	for _, id := range []string{malformed, settledAlready, otherOrg, noRef, emptyRef, badName, fresh, kubernetes} {
		for _, w := range e.spy.Writes() {
			if fsspy.DocID(w.Document) == id {
				t.Errorf("row %s was written: %+v", id, w)
			}
		}
	}

	// The run record.
	rec, err := e.runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, h := range rec.History {
		states = append(states, h.State)
	}
	if rec.Status != "completed" || !slices.Equal(states, []string{"initiated", "reconciling", "completed"}) ||
		rec.Trigger != "local" || rec.Actor != "test" || rec.WorkflowType != string(contract.ExecutionSyncCloudRun) {
		t.Errorf("run record = status %s history %v trigger %s actor %s type %s", rec.Status, states, rec.Trigger, rec.Actor, rec.WorkflowType)
	}
	if rec.Output["candidate_count"] != int64(12) || rec.InitialData["limit"] != int64(200) || rec.Stats == nil {
		t.Errorf("run record output %v, initial data %v, stats %v", rec.Output, rec.InitialData, rec.Stats)
	}

	// Past the grace the not-found row is settled lost; nothing else changes.
	e.clock.Advance(15 * time.Minute)
	out = e.start(map[string]any{"limit": 200})
	_, s = outputOf(t, out)
	if s.Settled["lost"] != 1 {
		t.Errorf("second run stats = %+v, want one lost", s)
	}
	r := e.get(notFound)
	if r.Active || r.Outcome != ledger.OutcomeLost || r.Status != ledger.StatusFailed || r.Settlement.Reason != executionsync.ReasonLost || r.FailureReason == "" {
		t.Errorf("not-found row past the grace = %+v", r)
	}
}

func TestSecondRunStartsAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for range 5 {
		e.stale(succeeded)
		e.stale(failed)
		e.stale(running)
	}
	e.put(row{observedAt: e.clock.Now().Add(-time.Hour), active: true, ref: "absent"})
	first, _ := outputOf(t, e.start(map[string]any{}))
	if first.StartedCount != 15 {
		t.Fatalf("first run started %d, want 15", first.StartedCount)
	}
	e.spy.Reset()
	out := e.start(map[string]any{})
	o, s := outputOf(t, out)
	if o.StartedCount != 0 || o.FailedStartCount != 0 || o.CandidateCount != 1 || o.SkippedMissingMetadataCount != 1 || len(s.Settled) != 0 {
		t.Errorf("second run = %+v %+v, want only the row without a provider reference, skipped", o, s)
	}
	if w := e.executionWrites(""); len(w) != 0 {
		t.Errorf("second run wrote runner executions: %v", w)
	}
	for _, w := range e.spy.Writes() {
		if !slices.Contains([]string{ledger.RunsCollection}, collectionOf(w.Document)) {
			t.Errorf("second run wrote %s", w.Document)
		}
	}
	if got := e.fake.Calls(cloudrunfake.GetExecution); got != 15 {
		t.Errorf("Cloud Run calls over both runs = %d, want 15 (none in the second)", got)
	}
}

func collectionOf(doc string) string {
	parts := strings.Split(doc, "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2]
}

func TestConcurrentRunsSettleEachRowExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 4}})
	terminal := append(append(e.staleRows(40, succeeded),
		e.staleRows(40, failed)...), e.staleRows(40, cancelled)...)
	alive := e.staleRows(30, running)

	const runs = 4
	outs := make([]workflow.Outcome, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.try(map[string]any{"limit": 200})
			if err != nil {
				t.Error(err)
				return
			}
			outs[i] = out
		}()
	}
	wg.Wait()

	settled, refreshed, raced, errored := 0, 0, 0, 0
	for _, out := range outs {
		if out.Status != workflow.StateCompleted {
			t.Fatalf("a run ended %s: %v", out.Status, out.Err)
		}
		_, s := outputOf(t, out)
		for _, n := range s.Settled {
			settled += n
		}
		refreshed += s.Refreshed
		raced += s.Raced
		errored += s.Errored
	}
	t.Logf("4 concurrent runs over 150 stale rows: settled %d, refreshed %d, raced %d, errored %d", settled, refreshed, raced, errored)
	if settled != len(terminal) {
		t.Errorf("runs report %d settlements, want %d", settled, len(terminal))
	}
	if refreshed != len(alive) {
		t.Errorf("runs report %d refreshes, want %d", refreshed, len(alive))
	}
	writes := e.executionWrites("settlement")
	for _, id := range terminal {
		if writes[id] != 1 {
			t.Errorf("row %s has %d settlement writes, want exactly 1", id, writes[id])
		}
		if r := e.get(id); r.Active || r.Settlement == nil {
			t.Errorf("row %s not settled", id)
		}
	}
	if len(writes) != len(terminal) {
		t.Errorf("%d rows got settlement writes, want %d", len(writes), len(terminal))
	}
	refreshes := e.executionWrites("observed_at")
	for _, id := range alive {
		if refreshes[id] != 1 {
			t.Errorf("live row %s refreshed %d times, want once", id, refreshes[id])
		}
	}
}

// racer stands between the workflow and Cloud Run and, for one row, plays the runner confirming
// its execution after the scan and before the settling transaction.
type racer struct {
	executor.Executor
	target map[string]any
	touch  func()
}

func (r *racer) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	snap, err := r.Executor.Observe(ctx, ref)
	if ref["execution"] == r.target["execution"] {
		r.touch()
	}
	return snap, err
}

// racedRun seeds a stale, succeeded row of its env's organization and starts req over that
// organization, touch running between the scan and the row's transaction (when the row's
// execution is observed); it returns the row as the run left it and the run's stats.
func racedRun(t *testing.T, touch func(e *env, id string), req workflow.Request) (ledger.Execution, executionsync.Stats) {
	t.Helper()
	var rc *racer
	e := newEnv(t, options{wrap: func(x executor.Executor) executor.Executor {
		rc = &racer{Executor: x}
		return rc
	}})
	id := e.stale(succeeded)
	rc.target = e.get(id).ProviderRef
	rc.touch = func() { touch(e, id) }
	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org})
	req.Type, req.InitialData, req.Trigger, req.Actor = contract.ExecutionSyncCloudRun, raw, workflow.TriggerLocal, "test"
	out, err := e.engine.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, s := outputOf(t, out)
	return e.get(id), s
}

func TestRowRefreshedBetweenScanAndTransactionIsNotSettled(t *testing.T) {
	t.Parallel()
	var rc *racer
	e := newEnv(t, options{wrap: func(x executor.Executor) executor.Executor {
		rc = &racer{Executor: x}
		return rc
	}})
	id := e.stale(succeeded)
	other := e.stale(succeeded)
	before := e.get(id)
	rc.target = before.ProviderRef
	later := e.clock.Now().Add(-5 * time.Second)
	rc.touch = func() {
		_, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(id).Update(context.Background(),
			[]firestore.Update{{Path: "observed_at", Value: later}})
		if err != nil {
			t.Error(err)
		}
	}

	out := e.start(map[string]any{})
	o, s := outputOf(t, out)
	if s.Raced != 1 || s.Settled["succeeded"] != 1 || o.StartedCount != 2 {
		t.Errorf("output %+v stats %+v, want one raced, one settled", o, s)
	}
	r := e.get(id)
	if !r.Active || r.Settlement != nil || !r.ObservedAt.Equal(later) || r.Sync.Attempts != 0 {
		t.Errorf("the refreshed row was changed by the sweep: %+v", r)
	}
	if w := e.executionWrites("settlement"); w[id] != 0 || w[other] != 1 {
		t.Errorf("settlement writes = %v", w)
	}
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.stale(succeeded)
	e.spy.Reset()
	org := `"organization_uuid": "` + e.org + `"`
	tests := []struct{ name, input, field string }{
		{"missing organization_uuid", `{"limit": 5}`, "organization_uuid"},
		{"organization_uuid not a uuid", `{"organization_uuid": "acme-corp"}`, "organization_uuid"},
		{"limit 0", `{` + org + `, "limit": 0}`, "limit"},
		{"limit 201", `{` + org + `, "limit": 201}`, "limit"},
		{"limit ten", `{` + org + `, "limit": "ten"}`, "limit"},
		{"unknown field", `{` + org + `, "dry_run": true}`, "dry_run"},
	}
	for _, tt := range tests {
		_, err := e.engine.Start(context.Background(), workflow.Request{
			Type: contract.ExecutionSyncCloudRun, InitialData: []byte(tt.input), Trigger: workflow.TriggerLocal,
		})
		if contract.CodeOf(err) != contract.CodeValidationFailed {
			t.Errorf("%s: err = %v, want validation_failed", tt.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: error %q does not name %s", tt.name, err, tt.field)
		}
	}
	if n := e.spy.Commits(); n != 0 {
		t.Errorf("refused inputs committed %d times", n)
	}
	if n := e.fake.Calls(cloudrunfake.GetExecution); n != 0 {
		t.Errorf("refused inputs made %d Cloud Run calls", n)
	}
}

func TestUnavailableSettlesNothingOnAnErroredCallAndEveryRowWithinFiveRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cloudRun: cloudrun.Config{MaxAttempts: 1}})
	rows := e.staleRows(40, succeeded)
	e.fake.FailRate(cloudrunfake.GetExecution, codes.Unavailable, 0.3)

	for run := 1; run <= 5; run++ {
		out := e.start(map[string]any{"limit": 200})
		o, s := outputOf(t, out)
		for _, id := range o.FailedRunnerExecutionUUIDs {
			r := e.get(id)
			if !r.Active || r.Settlement != nil {
				t.Errorf("run %d: row %s settled although its call failed", run, id)
			}
			if r.Sync.LastError == "" {
				t.Errorf("run %d: row %s has no recorded error", run, id)
			}
		}
		if s.Errored != o.FailedStartCount {
			t.Errorf("run %d: errored %d != failed starts %d", run, s.Errored, o.FailedStartCount)
		}
		t.Logf("run %d: started %d, failed %d", run, o.StartedCount, o.FailedStartCount)
		if o.CandidateCount == 0 {
			break
		}
	}
	for _, id := range rows {
		if r := e.get(id); r.Active {
			t.Errorf("row %s still active after five runs at a 30%% error rate", id)
		}
	}
	if w := e.executionWrites("settlement"); len(w) != len(rows) {
		t.Errorf("settlement writes on %d rows, want %d", len(w), len(rows))
	}
}

func TestResourceExhaustedStopsExecutorCallsForTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 1}})
	rows := e.staleRows(10, succeeded)
	e.fake.FailNext(cloudrunfake.GetExecution, codes.ResourceExhausted, 1)

	out := e.start(map[string]any{})
	o, s := outputOf(t, out)
	if out.Status != workflow.StateCompleted {
		t.Errorf("run ended %s: %v; quota pressure is not a failure", out.Status, out.Err)
	}
	if got := e.fake.Calls(cloudrunfake.GetExecution); got != 1 {
		t.Errorf("Cloud Run calls = %d, want 1: no call after ResourceExhausted", got)
	}
	if s.StoppedBy != "resource_exhausted" || s.Errored != 1 || s.Deferred != 9 || o.FailedStartCount != 10 {
		t.Errorf("stats %+v output %+v", s, o)
	}
	for _, id := range rows {
		if r := e.get(id); !r.Active {
			t.Errorf("row %s settled in a run that stopped calling Cloud Run", id)
		}
	}
	out = e.start(map[string]any{})
	_, s = outputOf(t, out)
	if s.Settled["succeeded"] != 10 {
		t.Errorf("the next run settled %v, want all 10", s.Settled)
	}
}

func TestResourceExhaustedWithConcurrencyStartsNoNewCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 4}})
	e.staleRows(40, succeeded)
	e.fake.FailRate(cloudrunfake.GetExecution, codes.ResourceExhausted, 1)
	_, s := outputOf(t, e.start(map[string]any{}))
	if got := e.fake.Calls(cloudrunfake.GetExecution); got > 4 {
		t.Errorf("Cloud Run calls = %d with 4 workers, want at most 4 (those in flight when the first failed)", got)
	}
	if s.StoppedBy != "resource_exhausted" || s.Deferred+s.Errored != 25 {
		t.Errorf("stats = %+v", s)
	}
}

func TestPermissionDeniedFailsTheRunAndSettlesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 1}})
	rows := e.staleRows(5, succeeded)
	e.fake.FailRate(cloudrunfake.GetExecution, codes.PermissionDenied, 1)
	out := e.start(map[string]any{})
	if out.Status != workflow.StateFailed {
		t.Fatalf("run ended %s, want failed", out.Status)
	}
	want := map[string]any{
		"failure_reason": "executor_permission_denied", "failed_step": "sync", "failed_layer": "executor",
		"failed_at_state": "reconciling", "failed_action": "complete", "error_type": "PermissionDenied", "failure_type": "permanent",
	}
	for k, v := range want {
		if out.Output[k] != v {
			t.Errorf("output[%s] = %v, want %v", k, out.Output[k], v)
		}
	}
	if out.Output["failed_at"] == nil || out.Output["error"] == "" || out.Output["completed_at"] != nil {
		t.Errorf("output = %v", out.Output)
	}
	if got := e.fake.Calls(cloudrunfake.GetExecution); got != 1 {
		t.Errorf("Cloud Run calls = %d, want 1", got)
	}
	for _, id := range rows {
		if r := e.get(id); !r.Active {
			t.Errorf("row %s settled", id)
		}
	}
	rec, err := e.runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "failed" || rec.Failure == nil || rec.Failure.Reason != "executor_permission_denied" || rec.FailedAt.IsZero() {
		t.Errorf("run record = %+v", rec)
	}
}

func TestRunsOfOneOrganizationNeverTouchAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	mine := e.staleRows(10, succeeded)
	var theirs []string
	for range 10 {
		theirs = append(theirs, e.put(row{org: e.other, observedAt: e.clock.Now().Add(-time.Hour), active: true, exec: succeeded}))
	}
	e.spy.Reset()
	e.start(map[string]any{"limit": 200})
	read := map[string]bool{}
	for _, d := range e.spy.Reads() {
		read[fsspy.DocID(d)] = true
	}
	written := map[string]bool{}
	for _, w := range e.spy.Writes() {
		written[fsspy.DocID(w.Document)] = true
	}
	for _, id := range theirs {
		if read[id] || written[id] {
			t.Errorf("the other organization's row %s was read (%t) or written (%t)", id, read[id], written[id])
		}
		if r := e.get(id); !r.Active || r.Sync.Attempts != 0 {
			t.Errorf("the other organization's row %s changed", id)
		}
	}
	for _, id := range mine {
		if !read[id] || !written[id] {
			t.Errorf("own row %s not read and written", id)
		}
	}
}

func TestScanSkipsRowsWithoutAReferenceWithoutStarvingTheRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	oldest := e.clock.Now().Add(-time.Hour)
	for range 10 {
		e.put(row{observedAt: oldest, active: true, ref: "absent"})
	}
	var syncable []string // oldest first
	for i := range 10 {
		syncable = append(syncable, e.put(row{observedAt: oldest.Add(time.Duration(i+1) * time.Minute), active: true, exec: succeeded}))
	}
	o, s := outputOf(t, e.start(map[string]any{"limit": 5}))
	if o.StartedCount != 5 || o.SkippedMissingMetadataCount != 10 || s.Scanned != 15 || s.ScanCapped {
		t.Errorf("output %+v stats %+v: want 5 started past 10 skipped, 15 read", o, s)
	}
	if got := e.fake.Calls(cloudrunfake.GetExecution); got != 5 {
		t.Errorf("Cloud Run calls = %d, want 5", got)
	}
	for i, id := range syncable {
		if settled := !e.get(id).Active; settled != (i < 5) {
			t.Errorf("syncable row %d (oldest first) settled = %t, want %t", i, settled, i < 5)
		}
	}
}

func TestScanStopsAtItsDocumentCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{ScanFactor: 2}})
	oldest := e.clock.Now().Add(-time.Hour)
	for range 30 {
		e.put(row{observedAt: oldest, active: true, ref: "absent"})
	}
	e.stale(succeeded)
	o, s := outputOf(t, e.start(map[string]any{"limit": 5}))
	if s.Scanned != 10 || !s.ScanCapped || o.StartedCount != 0 {
		t.Errorf("output %+v stats %+v: want exactly 10 documents read, capped", o, s)
	}
}

func TestBudgetSpentDefersTheRestAndLeavesNoHalfWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{Concurrency: 1, Budget: time.Second}})
	rows := e.staleRows(5, succeeded)
	e.fake.SetLatency(cloudrunfake.GetExecution, 400*time.Millisecond)
	out := e.start(map[string]any{})
	o, s := outputOf(t, out)
	if out.Status != workflow.StateCompleted {
		t.Errorf("run ended %s: %v", out.Status, out.Err)
	}
	// Five calls of 400 ms cannot fit a 1 s budget, however fast the machine.
	if !s.OutOfBudget || s.Deferred == 0 || o.FailedStartCount != s.Deferred+s.Errored {
		t.Errorf("stats = %+v output = %+v", s, o)
	}
	for _, id := range rows {
		r := e.get(id)
		settled := r.Settlement != nil
		if settled == r.Active || settled != (r.Status == ledger.StatusSucceeded) || settled != !r.CompletedAt.IsZero() {
			t.Errorf("row %s half written: active=%t status=%s settlement=%t completed_at=%v", id, r.Active, r.Status, settled, r.CompletedAt)
		}
	}
}

func TestEveryQueryHasADeclaredIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	for range 3 {
		e.put(row{observedAt: e.clock.Now().Add(-time.Hour), active: true, ref: "absent"})
	}
	e.stale(succeeded)
	e.start(map[string]any{"limit": 1})
	qs := e.spy.Queries()
	if len(qs) < 2 {
		t.Fatalf("saw %d queries, want the paged scan's (at least 2)", len(qs))
	}
	for _, q := range qs {
		sh := fsspy.Shape(q)
		if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
			t.Errorf("query %+v has no index in indexes.Composite", sh)
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// The opt-out and the row's tenancy are checked in each row's own transaction, not only by the
// scan: a row whose organization opted out, or that moved to another organization, between the
// scan and its transaction is left as it is and counted as refused. A run the operator told to
// include disabled organizations settles the first anyway.
func TestARowIsSettledOnlyIfItsTransactionFindsItTheRunsToWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		touch           func(e *env, id string)
		includeDisabled bool
		refused         string // "" settles
	}{
		{"its organization opted out", func(e *env, _ string) { e.optOut(e.org) }, false, executionsync.RefuseDisabled},
		{"its organization opted out; the operator includes it", func(e *env, _ string) { e.optOut(e.org) }, true, ""},
		{"it moved to another organization", func(e *env, id string) { e.move(id, "organization_uuid", e.other) }, false, executionsync.RefuseOtherOrganization},
		{"it moved to another executor", func(e *env, id string) { e.move(id, "provider", ledger.ProviderKubernetes) }, false, executionsync.RefuseOtherProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, s := racedRun(t, tt.touch, workflow.Request{Overrides: workflow.Overrides{OptOut: tt.includeDisabled}})
			switch {
			case tt.refused == "" && (r.Active || s.Settled["succeeded"] != 1):
				t.Errorf("row active=%t, stats %+v; want it settled", r.Active, s)
			case tt.refused != "" && (!r.Active || r.Sync.Attempts != 0 || s.Refused[tt.refused] != 1):
				t.Errorf("row active=%t attempts=%d, refused %v; want it untouched and refused %s", r.Active, r.Sync.Attempts, s.Refused, tt.refused)
			}
		})
	}
}

func (e *env) optOut(org string) {
	e.t.Helper()
	if err := (ledgertest.Organizations{Client: e.fs}).Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: false}); err != nil {
		e.t.Error(err)
	}
}

func (e *env) move(id, field, value string) {
	e.t.Helper()
	if _, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(id).Update(context.Background(), []firestore.Update{{Path: field, Value: value}}); err != nil {
		e.t.Error(err)
	}
}

// What the executor last said of a live execution survives an unknown spell: a row refreshed
// while Cloud Run reported it running, then forgotten by Cloud Run, is settled lost with that
// last snapshot (its log URI, its task counts) as evidence.
func TestALostSettlementCarriesTheLastSnapshotTheExecutorGave(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: 15 * time.Minute}})
	id := e.stale(running)
	name := e.get(id).ProviderRef["execution"].(string)
	exec, _ := e.fake.Execution(name)

	e.start(map[string]any{}) // refreshed: running
	r := e.get(id)
	if r.Sync.LastSnapshot["log_uri"] != exec.GetLogUri() || r.Sync.LastSnapshot["seen_at"] == nil {
		t.Fatalf("refresh kept %v, want the log URI %s and when it was seen", r.Sync.LastSnapshot, exec.GetLogUri())
	}
	e.fake.RemoveExecution(name)
	e.clock.Advance(10 * time.Minute)
	e.start(map[string]any{}) // unknown
	e.clock.Advance(20 * time.Minute)
	e.start(map[string]any{}) // lost
	r = e.get(id)
	if r.Active || r.Outcome != ledger.OutcomeLost {
		t.Fatalf("row = %+v, want settled lost", r)
	}
	last, _ := r.Settlement.Evidence["last_snapshot"].(map[string]any)
	if last["log_uri"] != exec.GetLogUri() || last["task_count"] == nil {
		t.Errorf("the lost settlement's evidence %v does not carry the last snapshot (log URI %s)", r.Settlement.Evidence, exec.GetLogUri())
	}
}

// Rows a writer stamped without observed_at, or with a string or a number there, are active
// forever and no scan sees them: each run counts them, names a sample, and never touches them.
// The count runs while the run settles the visible rows, and is exact all the same.
func TestRowsNoScanCanSeeAreCountedAndLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	var visible []string
	for range 80 {
		visible = append(visible, e.stale(succeeded))
	}
	var bad []string
	for _, v := range []any{nil, "2026-11-29T08:00:00Z", int64(1764403200)} {
		id := uuid.NewString()
		doc := map[string]any{"organization_uuid": e.org, "provider": ledger.ProviderCloudRun, "status": ledger.StatusRunning, "active": true,
			"provider_ref": map[string]any{"execution": cloudrunfake.ExecutionName("p", "l", "j", "e-"+id[:8])}}
		if v != nil {
			doc["observed_at"] = v
		}
		if _, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(context.Background(), doc); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, id)
	}
	e.spy.Reset()
	out := e.start(map[string]any{"limit": 200})
	_, s := outputOf(t, out)
	if s.Invisible == nil || s.Invisible.Count != 3 || !slices.Equal(sorted(s.Invisible.Sample), sorted(bad)) {
		t.Errorf("stats.invisible = %+v, want the 3 rows %v", s.Invisible, bad)
	}
	if s.Settled["succeeded"] != len(visible) {
		t.Errorf("%d visible rows settled, want %d: %+v", s.Settled["succeeded"], len(visible), s)
	}
	for _, id := range visible {
		if e.get(id).Active {
			t.Errorf("visible row %s was not settled", id)
		}
	}
	for _, id := range bad {
		for _, w := range e.spy.Writes() {
			if strings.HasSuffix(w.Document, "/"+id) {
				t.Errorf("an invisible row was written: %s", w.Document)
			}
		}
	}
	out = e.start(map[string]any{})
	if _, s := outputOf(t, out); s.Invisible == nil || s.Invisible.Count != 3 {
		t.Errorf("a second run: stats.invisible = %+v", s.Invisible)
	}
}

// A sync message delivered again after its run decided the row ends as a duplicate — read from
// the receipt, not found out from a failed write — and writes nothing, whatever the row's state:
// an unknown row, which stays what the scan saw, is decided again otherwise.
func TestASecondDeliveryOfASyncIsADuplicateAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: time.Hour}})
	ctx := context.Background()
	id := e.stale(nil) // Cloud Run does not know it: unknown, observed_at unmoved
	row := e.get(id)
	run, syncer := e.messageSyncer()
	req := message.Sync{WorkflowRunUUID: run, OrganizationUUID: e.org, RunnerExecutionUUID: id,
		Provider: ledger.ProviderCloudRun, ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt}
	if res := syncer.SyncOnce(ctx, req); res.Outcome != executionsync.SyncUnknown {
		t.Fatalf("first delivery: %+v, want unknown", res)
	}
	first := e.get(id)
	e.spy.Reset()
	if res := syncer.SyncOnce(ctx, req); res.Outcome != executionsync.SyncDuplicate {
		t.Errorf("second delivery: %+v, want a duplicate", res)
	}
	if n := len(e.spy.Writes()); n != 0 || e.get(id).Sync.Attempts != first.Sync.Attempts {
		t.Errorf("the second delivery wrote %d documents; attempts %d → %d", n, first.Sync.Attempts, e.get(id).Sync.Attempts)
	}
}
