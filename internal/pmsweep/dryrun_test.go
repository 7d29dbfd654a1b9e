package pmsweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// fourTasks is the dataset of TestStaleTasksAreReclaimedAndComeBackFromNext: four claimed
// tasks, 300 s on; task 2's worker heartbeat 100 s ago, task 3's worker heartbeat now with its
// own clock 300 s behind (Firestore's time counts). Tasks 0 and 1 are silent for exactly the TTL.
func (e *env) fourTasks() []ledgertest.Lease {
	e.T.Helper()
	ctx := context.Background()
	leases := e.claimed(4)
	e.Clock.Advance(200 * time.Second)
	if _, err := e.worker.Heartbeat(ctx, leases[2], e.Clock.Now()); err != nil { // task 2 is alive
		e.T.Fatal(err)
	}
	e.Clock.Advance(100 * time.Second)
	// Task 3's worker's clock runs 300 s behind: its heartbeat still counts when Firestore took it.
	if _, err := e.worker.Heartbeat(ctx, leases[3], e.Clock.Now().Add(-300*time.Second)); err != nil {
		e.T.Fatal(err)
	}
	return leases
}

// start runs the sweep through the engine, with the engine's dry run or not.
func (e *env) start(in pmsweep.Input, dryRun bool) (workflow.Outcome, pmsweep.Output, pmsweep.Stats) {
	e.T.Helper()
	raw, _ := json.Marshal(in)
	out, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal, DryRun: dryRun})
	if err != nil {
		e.T.Fatal(err)
	}
	var o pmsweep.Output
	var s pmsweep.Stats
	testenv.Decode(e.T, out.Output, &o)
	testenv.Decode(e.T, out.Stats, &s)
	return out, o, s
}

func reclaimedIDs(o pmsweep.Output) []string {
	var ids []string
	for _, r := range o.Reclaimed {
		ids = append(ids, r.Task)
	}
	slices.Sort(ids)
	return ids
}

// The engine's dry run and the seed's dry_run are one path: both report, in the seed's output
// and row by row in the stats, the two tasks the real sweep then reclaims, and neither writes
// anything.
func TestADryRunReportsWhatTheSweepThenReclaimsAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	e.fourTasks()
	e.Clock.Advance(time.Second)
	e.Spy.Reset()

	in := pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "janitor-7"}
	out, o, s := e.start(in, true)
	sweeptest.NoWrites(t, e.Spy, "the engine's dry run")
	seedIn := in
	seedIn.DryRun = true
	_, seedO, seedS := e.start(seedIn, false)
	for _, w := range e.Spy.Writes() { // a run with the seed's dry_run has a run record, and writes nothing else
		if !strings.Contains(w.Document, "/"+ledger.RunsCollection+"/") && !strings.Contains(w.Document, "/"+ledger.GuardsCollection+"/") {
			t.Errorf("the seed's dry run wrote %s", w.Document)
		}
	}
	if !out.DryRun || out.Status != workflow.StateCompleted || !o.DryRun || o.Stale != 2 || o.Scanned != 4 {
		t.Errorf("engine dry run: %s, output %+v", out.Status, o)
	}
	ob, _ := json.Marshal(o)
	seedOb, _ := json.Marshal(seedO)
	pb, _ := json.Marshal(s.Preview)
	seedPb, _ := json.Marshal(seedS.Preview)
	if string(ob) != string(seedOb) || string(pb) != string(seedPb) {
		t.Errorf("the engine's dry run and the seed's dry_run differ:\n%s %s\n%s %s", ob, pb, seedOb, seedPb)
	}
	p := s.Preview
	if p == nil || p.Counts["reclaim"] != 2 || len(p.Counts) != 1 || p.StormGuardWouldStop || p.ReadWith != explain.ReadOnlyTransaction {
		t.Fatalf("preview %+v", p)
	}
	for _, r := range o.Reclaimed {
		if r.ReclaimStatusSHA != "" {
			t.Errorf("a dry run names a status it did not append: %+v", r)
		}
	}
	for _, id := range []string{"task-000", "task-001"} {
		if task := e.task(id); task.Status != ledger.TaskWorking || task.ReclaimCount != 0 {
			t.Errorf("the dry run changed %s: %+v", id, task)
		}
	}

	_, real, realS := e.start(in, false)
	if got, want := reclaimedIDs(real), reclaimedIDs(o); !slices.Equal(got, want) || len(real.Raced) != len(o.Raced) || realS.Poisoned != s.Poisoned {
		t.Errorf("the real sweep reclaimed %v (raced %v); the dry run said %v (raced %v)", got, real.Raced, want, o.Raced)
	}
}

// Explain's verdict on each of the four tasks, and on one no scan can see, is what the next
// sweep with the seed's TTL does with it; after it, explain shows the reclaim recorded.
func TestExplainSaysWhatTheNextSweepDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	e.fourTasks()
	e.Clock.Advance(time.Second)
	if _, err := e.FS.Collection(ledger.TaskQueuesCollection).Doc(e.queue).Collection(ledger.TasksCollection).Doc("invisible").Set(context.Background(),
		map[string]any{"slug": "s", "status": ledger.TaskWorking, "worker_id": "w"}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"task-000", "task-001", "task-002", "task-003", "invisible"}
	said := sweeptest.ExplainEach(t, ids, func(id string) (explain.Explanation, error) {
		return e.wf.Explain(context.Background(), e.tasks, e.queue, id, explain.Options{})
	})
	e.Spy.Reset()
	_, o, _ := e.start(pmsweep.Input{Queue: e.queue, TTL: pmsweep.TTLDefault, Reclaimer: "janitor"}, false)
	reclaimed := map[string]bool{}
	for _, r := range o.Reclaimed {
		reclaimed[r.Task] = true
	}
	sweeptest.ExplainAgrees(t, said, ids, "reclaim", reclaimed, "task", "reclaimed")
	if x := said["task-002"]; x.Verdict != "skip" || x.Rule != "not_stale" {
		t.Errorf("a task whose worker heartbeat 101 s ago: %+v", x)
	}
	if x := said["invisible"]; x.Verdict != "skip" || x.Rule != "invisible" {
		t.Errorf("a task no scan sees: %+v", x)
	}
	x, err := e.wf.Explain(context.Background(), e.tasks, e.queue, "task-000", explain.Options{})
	if err != nil || x.Verdict != "skip" || x.Rule != string(pmsweep.LeftNotWorking) || x.Last["reclaim_count"] != int64(1) || x.Last["status_head"] == nil {
		t.Errorf("after the sweep: %+v %v", x, err)
	}
	if _, err := e.wf.Explain(context.Background(), e.tasks, e.queue, "no-such-task", explain.Options{}); !errors.Is(err, ledger.ErrNoRow) {
		t.Errorf("a missing task: %v, want ErrNoRow", err)
	}
}
