package pmsweep_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Workers whose clocks are an hour off either way, heartbeating as a live worker does, are never
// reclaimed: staleness is judged on Firestore's clock, as in production (server timestamps,
// ServerClock), and the sweeper's own clock (here an hour ahead) does not enter it either. A
// task Firestore last saw two hours ago is reclaimed, so the sweep does sweep.
func TestWorkersAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ctx := context.Background()
	tasks := ledger.NewTaskStore(fs, ledger.TxConfig{})
	writer := ledgertest.Tasks{Client: fs}
	skewed := func() time.Time { return time.Now().Add(time.Hour) } // the sweeper's own clock
	engine := workflow.NewEngine(workflow.Options{Runs: ledger.NewRunStore(fs), Now: skewed, Log: logging.Discard()},
		pmsweep.New(tasks, pmsweep.Config{}, ledger.ServerClock(fs)).Definition())
	queue := "q-" + uuid.NewString()[:8]

	live := map[string]time.Duration{"behind": -time.Hour, "ahead": time.Hour}
	for name, skew := range live {
		worker := func() time.Time { return time.Now().Add(skew) }
		if err := writer.Enqueue(ctx, queue, name, name, worker()); err != nil {
			t.Fatal(err)
		}
		l, err := writer.Next(ctx, queue, "worker-"+name, worker())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Heartbeat(ctx, l, worker()); err != nil {
			t.Fatal(err)
		}
	}
	longAgo := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(time.Now().Add(-2 * time.Hour))}
	if err := longAgo.Enqueue(ctx, queue, "dead", "dead", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := longAgo.Next(ctx, queue, "worker-dead", time.Now()); err != nil {
		t.Fatal(err)
	}

	// A TTL of an hour less a minute: any clock an hour off on either side would cross it.
	raw, _ := json.Marshal(pmsweep.Input{Queue: queue, TTL: 3540, Reclaimer: "janitor"})
	out, err := engine.Start(ctx, workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("sweep: %v %v", out.Err, err)
	}
	var o pmsweep.Output
	testenv.Decode(t, out.Output, &o)
	if o.Scanned != 3 || len(o.Reclaimed) != 1 || o.Reclaimed[0].Task != "dead" || len(o.Raced) != 0 {
		t.Errorf("output %+v, want only the task Firestore last saw two hours ago reclaimed", o)
	}
	for name := range live {
		if task, err := tasks.GetTask(ctx, queue, name); err != nil || task.Status != ledger.TaskWorking || task.ReclaimCount != 0 {
			t.Errorf("the live worker whose clock is %s lost its task: %+v %v", name, task, err)
		}
	}
}
