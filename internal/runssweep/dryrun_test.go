package runssweep_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// fleet is the dataset of TestBackgroundAndForegroundRunsAndTheirInterlocks: four idle runs
// (a background one holding its interlock, a foreground one, a background one whose interlock
// vanished, an old background one whose interlock names a newer live run) and two live ones.
type fleet struct{ bg, fg, lone, orphan, newer, live string }

func (e *env) interlockFleet() fleet {
	e.T.Helper()
	ctx := context.Background()
	var f fleet
	f.bg = e.start("crm", true, time.Hour)   // holds the crm interlock
	f.fg = e.start("crm", false, time.Hour)  // foreground: no interlock
	f.lone = e.start("erp", true, time.Hour) // its interlock vanished
	if _, err := e.FS.Collection(ledger.ExtensionInterlocksCollection).Doc(ledger.InterlockID(e.tenant, "erp")).Delete(ctx); err != nil {
		e.T.Fatal(err)
	}
	// An old background run whose interlock names a newer, live run.
	f.orphan = e.start("billing", true, 2*time.Hour)
	f.newer = "run-newer-" + uuid.NewString()
	if _, err := e.FS.Collection(ledger.ExtensionInterlocksCollection).Doc(ledger.InterlockID(e.tenant, "billing")).Set(ctx,
		ledger.Interlock{RunID: f.newer, AcquiredAt: e.Clock.Now()}); err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.FS.Collection(ledger.ExtensionRunsCollection).Doc(f.newer).Set(ctx, ledger.ExtensionRun{
		TenantID: e.tenant, ExtensionID: "billing", JobName: "j", Background: true, Status: ledger.ExtensionRunning,
		StartedAt: e.Clock.Now(), LastMovedAt: e.Clock.Now()}); err != nil {
		e.T.Fatal(err)
	}
	f.live = e.start("search", true, time.Second) // live: moved a second ago
	return f
}

// dryRun previews a sweep through the engine, as `stalesweep run --dry-run` does.
func (e *env) dryRun(trigger workflow.Trigger, input string, override bool) (workflow.Outcome, runssweep.Stats) {
	e.T.Helper()
	out := sweeptest.Dry(e.T, e.Engine, workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(input),
		Trigger: trigger, Overrides: workflow.Overrides{Storm: override}, DryRun: true})
	var s runssweep.Stats
	testenv.Decode(e.T, out.Stats, &s)
	if s.Preview == nil {
		e.T.Fatalf("a dry run's stats say nothing of what it would do: %+v", out.Stats)
	}
	return out, s
}

// rowsDoing returns the ids of the preview's rows with action, sorted.
func rowsDoing(p *explain.Preview, action string) []string {
	var ids []string
	for _, r := range p.Rows {
		if r.Action == action {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// A dry run over the interlock fleet reports the four abandonments, the one interlock released
// and the one held by another run, the real sweep then does exactly that, and the dry run
// wrote nothing at all: no run, no interlock, no run record.
func TestADryRunReportsWhatTheSweepThenDoesAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	f := e.interlockFleet()
	e.Spy.Reset()

	out, s := e.dryRun(workflow.TriggerLocal, `{"older_than_ms": 600000}`, false)
	sweeptest.NoWrites(t, e.Spy, "the dry run")
	if out.Status != workflow.StateCompleted || out.Output["swept"] != int64(0) {
		t.Errorf("dry run: %s, output %v; want completed with nothing swept", out.Status, out.Output)
	}
	p := s.Preview
	want := []string{f.bg, f.fg, f.lone, f.orphan}
	slices.Sort(want)
	if got := rowsDoing(p, "abandon"); !slices.Equal(got, want) {
		t.Errorf("the dry run would abandon %v, want %v", got, want)
	}
	if p.Counts["abandon"] != 4 || p.Counts["release_interlock"] != 1 || p.Counts["keep_interlock"] != 1 || p.StormGuardWouldStop || p.ReadWith != explain.ReadOnlyTransaction {
		t.Errorf("preview %+v", p)
	}
	for _, id := range []string{f.bg, f.orphan, f.newer, f.live} {
		if r := e.run(id); r.Status != ledger.ExtensionRunning {
			t.Errorf("the dry run changed run %s: %+v", id, r)
		}
	}
	if _, ok := e.interlock("crm"); !ok {
		t.Error("the dry run released an interlock")
	}

	o, real := e.mustSweep(`{"older_than_ms": 600000}`)
	var swept []string
	for _, r := range o.Runs {
		swept = append(swept, r.RunID)
	}
	slices.Sort(swept)
	if !slices.Equal(swept, want) || real.InterlocksReleased != s.InterlocksReleased || real.InterlocksHeldByOther != s.InterlocksHeldByOther ||
		real.Moved != s.Moved || real.NotIdle != s.NotIdle || real.StormGuard.Aged != s.StormGuard.Aged || real.StormGuard.Live != s.StormGuard.Live {
		t.Errorf("the real sweep did %v with stats %+v; the dry run said %v with %+v", swept, real, want, s)
	}
}

// A dry run the storm guard would stop fails as the real run would, says so row by row, and
// writes nothing; overridden from the command it previews the abandonments, still writing
// nothing.
func TestADryRunTheStormGuardWouldStopSaysSoAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 16 {
		e.start(fmt.Sprintf("idle-%02d", i), i%2 == 0, time.Hour)
	}
	for i := range 14 {
		e.start(fmt.Sprintf("live-%02d", i), true, time.Second)
	}
	e.Spy.Reset()

	out, s := e.dryRun(workflow.TriggerSchedule, `{"older_than_ms": 600000}`, false)
	if out.Status != workflow.StateFailed || !errors.Is(out.Err, storm.ErrTripped) {
		t.Errorf("dry run: %s %v, want failed by the storm guard as the real run would be", out.Status, out.Err)
	}
	if p := s.Preview; !p.StormGuardWouldStop || p.Counts["keep"] != 16 || p.Rules["keep/"+storm.Reason] != 16 || p.Counts["abandon"] != 0 {
		t.Errorf("preview %+v, want 16 kept by the storm guard", p)
	}
	if s.StormGuard == nil || !s.StormGuard.Tripped || s.StormGuard.Aged != 16 || s.StormGuard.Live != 30 {
		t.Errorf("verdict %+v", s.StormGuard)
	}

	out, s = e.dryRun(workflow.TriggerLocal, `{"older_than_ms": 600000}`, true)
	if out.Status != workflow.StateCompleted || s.Preview.StormGuardWouldStop || s.Preview.Counts["abandon"] != 16 || !s.StormGuard.Overridden {
		t.Errorf("overridden dry run: %s, preview %+v, verdict %+v", out.Status, s.Preview, s.StormGuard)
	}
	sweeptest.NoWrites(t, e.Spy, "the dry runs")
}

// Explain's verdict on every run of the interlock fleet, and on one no scan can see, is what
// the next sweep (at the threshold explain uses) does with it; after it, explain says the
// swept runs are no longer running and shows the settlement recorded.
func TestExplainSaysWhatTheNextSweepDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	f := e.interlockFleet()
	invisible := "run-invisible-" + uuid.NewString()
	if _, err := e.FS.Collection(ledger.ExtensionRunsCollection).Doc(invisible).Set(context.Background(), map[string]any{
		"tenant_id": e.tenant, "extension_id": "x", "job_name": "j", "status": ledger.ExtensionRunning, "last_moved_at": "yesterday"}); err != nil {
		t.Fatal(err)
	}
	all := []string{f.bg, f.fg, f.lone, f.orphan, f.newer, f.live, invisible}
	verdict := sweeptest.ExplainEach(t, all, func(id string) (explain.Explanation, error) {
		return e.wf.Explain(context.Background(), e.store, id, explain.Options{})
	})
	floor := fmt.Sprintf(`{"older_than_ms": %d}`, runssweep.ScheduledFloorMsDefault)
	o, _ := e.mustSweep(floor)
	swept := map[string]bool{}
	for _, r := range o.Runs {
		swept[r.RunID] = true
	}
	sweeptest.ExplainAgrees(t, verdict, all, "abandon", swept, "run", "swept")
	if x := verdict[invisible]; x.Verdict != "skip" || x.Rule != "invisible" || x.Visible || !x.Checks[0].OK {
		t.Errorf("a run no scan sees: %+v", x)
	}
	if x := verdict[f.bg]; x.Rule != runssweep.ReasonIdle || x.Outcome != ledger.OutcomeAbandoned || !strings.Contains(x.Detail, "interlock released") {
		t.Errorf("the background run holding its interlock: %+v", x)
	}
	if x := verdict[f.orphan]; !strings.Contains(x.Detail, f.newer) {
		t.Errorf("the run whose interlock another holds: %+v", x)
	}
	x, err := e.wf.Explain(context.Background(), e.store, f.bg, explain.Options{})
	if err != nil || x.Verdict != "keep" || x.Rule != string(runssweep.LeftNotRunning) || x.Last["settlement"] == nil {
		t.Errorf("after the sweep: %+v %v", x, err)
	}
	if _, err := e.wf.Explain(context.Background(), e.store, "no-such-run", explain.Options{}); !errors.Is(err, ledger.ErrNoRow) {
		t.Errorf("a missing run: %v, want ErrNoRow", err)
	}
}
