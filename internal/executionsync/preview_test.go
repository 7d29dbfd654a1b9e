package executionsync_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// dry runs the workflow for input as a dry run, and checks that it wrote nothing at all: no
// committed write, no read-write transaction begun (the spy is reset first).
func (e *env) dry(input map[string]any) (executionsync.Output, executionsync.Stats, *executionsync.Preview) {
	e.t.Helper()
	if _, ok := input["organization_uuid"]; !ok {
		input["organization_uuid"] = e.org
	}
	raw, _ := json.Marshal(input)
	e.spy.Reset()
	out, err := e.engine.Start(context.Background(), workflow.Request{
		Type: contract.ExecutionSyncCloudRun, InitialData: raw, Trigger: workflow.TriggerLocal, Actor: "test", DryRun: true,
	})
	if err != nil || out.Status != workflow.StateCompleted || !out.DryRun {
		e.t.Fatalf("dry run: %v, status %s (%v), dry %t", err, out.Status, out.Err, out.DryRun)
	}
	if w := e.spy.Writes(); len(w) != 0 {
		e.t.Errorf("the dry run wrote %d documents: %+v", len(w), w)
	}
	if rw, ro := e.spy.Transactions(); rw != 0 || ro == 0 {
		e.t.Errorf("the dry run began %d read-write and %d read-only transactions, want 0 and some", rw, ro)
	}
	o, s := outputOf(e.t, out)
	if s.Preview == nil {
		e.t.Fatalf("the dry run's stats have no preview: %+v", out.Stats)
	}
	if len(s.Settled) != 0 || s.Refreshed != 0 || s.Unknown != 0 || s.Raced != 0 || s.Blind != nil || s.Refused != nil {
		e.t.Errorf("the dry run counts rows as done: %+v", s)
	}
	return o, s, s.Preview
}

// snapshot reads rows as they are.
func (e *env) snapshot(ids []string) map[string]ledger.Execution {
	e.t.Helper()
	out := map[string]ledger.Execution{}
	for _, id := range ids {
		if r, err := e.store.Get(context.Background(), id); err == nil {
			out[id] = r
		}
	}
	return out
}

// agree checks that the real run (its output and stats, and the rows before and after it) did to
// each row what the dry run's preview said it would, and counted the same.
func agree(t *testing.T, p *executionsync.Preview, dryOut executionsync.Output, realOut executionsync.Output, real executionsync.Stats, before, after map[string]ledger.Execution) {
	t.Helper()
	if !maps.Equal(p.WouldSettle, real.Settled) || p.WouldRefresh != real.Refreshed || p.WouldStayUnknown != real.Unknown ||
		!maps.Equal(p.HeldBlind, real.Blind) || !maps.Equal(p.Refused, real.Refused) || p.SkippedMissingMetadata != realOut.SkippedMissingMetadataCount {
		t.Errorf("preview counts %+v, real run %+v", p, real)
	}
	dryOut.StartedRunnerExecutionUUIDs = sorted(dryOut.StartedRunnerExecutionUUIDs)
	realOut.StartedRunnerExecutionUUIDs = sorted(realOut.StartedRunnerExecutionUUIDs)
	if !slices.Equal(dryOut.StartedRunnerExecutionUUIDs, realOut.StartedRunnerExecutionUUIDs) || dryOut.CandidateCount != realOut.CandidateCount ||
		dryOut.SkippedMissingMetadataCount != realOut.SkippedMissingMetadataCount || dryOut.FailedStartCount != realOut.FailedStartCount {
		t.Errorf("dry output %+v, real output %+v", dryOut, realOut)
	}
	listed := map[string]bool{}
	for _, row := range p.Rows {
		listed[row.RunnerExecutionUUID] = true
		b, a := before[row.RunnerExecutionUUID], after[row.RunnerExecutionUUID]
		wrote := a.Sync.Attempts != b.Sync.Attempts
		switch row.Verdict {
		case executionsync.VerdictSettle:
			if a.Active || a.Outcome != row.Outcome || a.Settlement == nil || a.Settlement.Reason != row.Rule {
				t.Errorf("row %s: preview settle %s (%s), real run left active=%t outcome=%s settlement=%+v", row.RunnerExecutionUUID, row.Outcome, row.Rule, a.Active, a.Outcome, a.Settlement)
			}
		case executionsync.VerdictRefresh:
			if !a.Active || !a.ObservedAt.After(b.ObservedAt) || a.Settlement != nil {
				t.Errorf("row %s: preview refresh, real run left %+v", row.RunnerExecutionUUID, a)
			}
		case executionsync.VerdictUnknown:
			if !a.Active || a.Sync.UnknownSince.IsZero() || !wrote || a.Settlement != nil {
				t.Errorf("row %s: preview unknown (%s), real run left %+v", row.RunnerExecutionUUID, row.Rule, a)
			}
		case executionsync.VerdictSkip:
			if wrote || !slices.Contains(real.Skipped, row.RunnerExecutionUUID) {
				t.Errorf("row %s: preview skip, real run wrote it (%t) or did not skip it (%v)", row.RunnerExecutionUUID, wrote, real.Skipped)
			}
		default:
			t.Errorf("row %s: preview %+v, a verdict this dataset does not have", row.RunnerExecutionUUID, row)
		}
	}
	for id, b := range before {
		if a := after[id]; !listed[id] && a.Sync.Attempts != b.Sync.Attempts {
			t.Errorf("row %s: not in the preview, but the real run wrote it: %+v", id, a)
		}
	}
}

// A dry run over the every-case dataset decides each row as the real run then does — settled,
// refreshed, unknown within the grace, skipped for its provider reference; and past the grace,
// lost — calls Cloud Run as often, and writes nothing: no commit with a write, no read-write
// transaction.
func TestADryRunDecidesEachRowAsTheRealRunThenDoesAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: 15 * time.Minute}})
	now := e.clock.Now()
	old := now.Add(-10 * time.Minute)
	all := []string{
		e.stale(succeeded), e.stale(failed), e.stale(cancelled), e.stale(running),
		e.stale(cloudrunfake.Reconciling), e.stale(cloudrunfake.Pending), e.stale(cloudrunfake.Cancelling),
		e.stale(nil),
		e.put(row{observedAt: old, active: true, ref: "absent"}),
		e.put(row{observedAt: old, active: true, ref: map[string]any{}}),
		e.put(row{observedAt: old, active: true, ref: map[string]any{"execution": "jobs/x"}}),
		e.put(row{observedAt: old, active: true, ref: "not-a-map"}),
		e.put(row{observedAt: now.Add(-30 * time.Second), active: true, exec: succeeded}),
		e.put(row{observedAt: old, active: false, status: ledger.StatusSucceeded, exec: failed}),
		e.put(row{observedAt: old, active: true, provider: ledger.ProviderKubernetes, exec: succeeded}),
		e.put(row{org: e.other, observedAt: old, active: true, exec: succeeded}),
	}
	notFound := all[7]

	for round, advance := range []time.Duration{0, 15 * time.Minute} {
		e.clock.Advance(advance)
		before := e.snapshot(all)
		calls := e.fake.Calls(cloudrunfake.GetExecution)
		dryOut, _, p := e.dry(map[string]any{"limit": 200})
		dryCalls := e.fake.Calls(cloudrunfake.GetExecution) - calls
		if after := e.snapshot(all); !equalRows(before, after) {
			t.Fatalf("round %d: the dry run changed rows", round)
		}
		out := e.start(map[string]any{"limit": 200})
		if out.Status != workflow.StateCompleted {
			t.Fatalf("round %d: real run %s: %v", round, out.Status, out.Err)
		}
		if realCalls := e.fake.Calls(cloudrunfake.GetExecution) - calls - dryCalls; realCalls != dryCalls || dryCalls == 0 {
			t.Errorf("round %d: the dry run called Cloud Run %d times, the real run %d", round, dryCalls, realCalls)
		}
		o, s := outputOf(t, out)
		agree(t, p, dryOut, o, s, before, e.snapshot(all))
		want := map[string]int{"succeeded": 1, "failed": 1, "cancelled": 1}
		if round == 1 { // the row Cloud Run does not know is past the grace; the fresh row is stale now
			want = map[string]int{"lost": 1, "succeeded": 1}
		}
		if !maps.Equal(p.WouldSettle, want) || len(p.Rows) != o.CandidateCount {
			t.Errorf("round %d: preview would settle %v, want %v; %d rows listed for %d candidates", round, p.WouldSettle, want, len(p.Rows), o.CandidateCount)
		}
	}
	if r := e.get(notFound); r.Outcome != ledger.OutcomeLost {
		t.Errorf("the row Cloud Run does not know was not settled lost past the grace: %+v", r)
	}
}

// The blind-executor guard in a dry run: a target with no fresh judgment is assessed on the same
// counts, not judged — no sweep_targets document is written — and its rows past the grace are
// reported held, as the real sweep then holds them; a seeing target's aged-out rows are reported
// lost, as the real sweep then settles them.
func TestADryRunAssessesABlindTargetWithoutRecordingAJudgment(t *testing.T) {
	t.Parallel()
	logs := &lines{}
	f := newBlindFleet(t, 3, logs)
	f.blindRows(5)
	f.seeingRows(12) // 12 it knows, of which it then forgets 2
	f.sweep(false)
	f.forget(f.rows[targetA]...)
	f.forget(f.rows[targetB][:2]...)
	f.e.clock.Advance(10 * time.Minute)
	f.sweep(false) // unknown, within the grace: no judgment needed
	f.e.clock.Advance(20 * time.Minute)
	// The real sweeps judged the targets while they answered (blindguard.Guard.Seen), long
	// enough ago that no judgment is fresh: the dry runs must assess, and record nothing.
	targets := targetstore.New(f.e.fs, ledger.Retention{})
	before := map[string]ledger.Target{}
	for _, tgt := range []string{targetA, targetB} {
		j, _, err := targets.Get(context.Background(), tgt)
		if err != nil || blindguard.Fresh(&j, f.e.clock.Now()) {
			t.Fatalf("target %s judged freshly before the dry run (%+v, %v): the test needs it without a fresh judgment", tgt, j, err)
		}
		before[tgt] = j
	}

	previews := map[string]*executionsync.Preview{}
	for _, org := range f.orgs {
		_, _, p := f.e.dry(map[string]any{"organization_uuid": org, "limit": 200})
		previews[org] = p
		if p.HeldBlind[targetA] != 5 {
			t.Errorf("dry run of %s holds %v, want the 5 rows of %s", org, p.HeldBlind, targetA)
		}
	}
	for _, tgt := range []string{targetA, targetB} {
		if j, _, err := targets.Get(context.Background(), tgt); err != nil || !j.JudgedAt.Equal(before[tgt].JudgedAt) || j.Blind != before[tgt].Blind {
			t.Errorf("the dry runs recorded a judgment of %s (%+v, %v; before %+v)", tgt, j, err, before[tgt])
		}
	}
	// Each held row is logged as a dry run's, never as a real run's line.
	if dry, real := logs.count(t, "WARNING", "dry run: runner execution unknown to a blind executor target", targetA),
		logs.count(t, "WARNING", "runner execution unknown to a blind executor target", targetA); dry != 15 || real != 0 {
		t.Errorf("the dry runs logged %d rows held as a dry run's and %d as a real run's, want 15 and 0", dry, real)
	}
	lost := 0
	for i, s := range f.sweep(false) {
		p := previews[f.orgs[i]]
		if !maps.Equal(p.HeldBlind, s.Blind) || !maps.Equal(p.WouldSettle, s.Settled) || p.WouldRefresh != s.Refreshed {
			t.Errorf("org %d: preview %+v, real run %+v", i, p, s)
		}
		lost += p.WouldSettle["lost"]
	}
	if lost != 2 || f.lost(targetB) != 2 || f.lost(targetA) != 0 {
		t.Errorf("previews would settle %d lost; the real sweep settled %d of the seeing target and %d of the blind one; want 2, 2, 0",
			lost, f.lost(targetB), f.lost(targetA))
	}
}

// A dry run of a workflow whose starter publishes its syncs (the pipeline's) decides inline with
// the syncer it was given, and publishes nothing; without one it fails and writes nothing.
func TestADryRunNeverPublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id := e.stale(succeeded)
	pub := &publishing{}
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun}
	for _, withSyncer := range []bool{false, true} {
		var preview *executionsync.Syncer
		if withSyncer {
			preview = e.syncer
		}
		wf, err := executionsync.New(e.store, e.exec, pub, cfg, e.clock.Now, preview)
		if err != nil {
			t.Fatal(err)
		}
		engine := workflow.NewEngine(workflow.Options{Runs: e.runs, Now: e.clock.Now, Log: e.log}, wf.Definition(executionsync.CloudRun))
		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org})
		e.spy.Reset()
		out, err := engine.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: raw, Trigger: workflow.TriggerLocal, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(e.spy.Writes()) != 0 || pub.calls != 0 {
			t.Errorf("with syncer %t: the dry run wrote %d documents and published %d times", withSyncer, len(e.spy.Writes()), pub.calls)
		}
		var s executionsync.Stats
		testenv.Decode(t, out.Stats, &s)
		switch {
		case !withSyncer && (out.Status != workflow.StateFailed || out.Output["failure_reason"] != "dry_run_unavailable"):
			t.Errorf("without a syncer: %s %v, want failed dry_run_unavailable", out.Status, out.Output)
		case withSyncer && (out.Status != workflow.StateCompleted || s.Preview == nil || s.Preview.WouldSettle["succeeded"] != 1):
			t.Errorf("with the syncer: %s %+v", out.Status, s.Preview)
		}
	}
	if r := e.get(id); !r.Active {
		t.Errorf("the row was settled: %+v", r)
	}
}

// publishing is a starter that would publish: it counts the syncs handed to it.
type publishing struct{ calls int }

func (p *publishing) Start(_ context.Context, reqs []message.Sync) []executionsync.SyncResult {
	p.calls += len(reqs)
	out := make([]executionsync.SyncResult, len(reqs))
	for i, r := range reqs {
		out[i] = executionsync.SyncResult{RunnerExecutionUUID: r.RunnerExecutionUUID, Outcome: executionsync.SyncPublished}
	}
	return out
}

func equalRows(a, b map[string]ledger.Execution) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		x, _ := json.Marshal(r)
		y, _ := json.Marshal(b[id])
		if string(x) != string(y) {
			return false
		}
	}
	return true
}
