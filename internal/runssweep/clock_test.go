package runssweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Apps whose clocks are an hour off either way, moving as a live app does, are never abandoned:
// staleness is judged on Firestore's clock, as in production (server timestamps, ServerClock),
// and the sweeper's own clock (here an hour ahead) does not enter it either. A run Firestore
// last saw two hours ago is abandoned, so the sweep does sweep.
func TestAppsAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ctx := context.Background()
	store := ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
	writer := ledgertest.ExtensionRuns{Client: fs}
	skewed := func() time.Time { return time.Now().Add(time.Hour) } // the sweeper's own clock
	engine := workflow.NewEngine(workflow.Options{Runs: ledger.NewRunStore(fs), Now: skewed, Log: logging.Discard()},
		runssweep.New(store, runssweep.Config{}, ledger.ServerClock(fs)).Definition())
	tenant := "tenant-" + uuid.NewString()[:8]

	live := map[string]time.Duration{"behind": -time.Hour, "ahead": time.Hour}
	for name, skew := range live {
		app := func() time.Time { return time.Now().Add(skew) }
		if err := writer.Start(ctx, ledger.ExtensionRun{RunID: name, TenantID: tenant, ExtensionID: name, JobName: "j", Background: true}, app()); err != nil {
			t.Fatal(err)
		}
		if err := writer.Move(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	dead := ledgertest.ExtensionRuns{Client: fs, Now: testenv.Fixed(time.Now().Add(-2 * time.Hour))}
	if err := dead.Start(ctx, ledger.ExtensionRun{RunID: "dead", TenantID: tenant, ExtensionID: "dead", JobName: "j", Background: true}, time.Now()); err != nil {
		t.Fatal(err)
	}

	// An hour's deadline: any clock an hour off on either side would cross it.
	out, err := engine.Start(ctx, workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(`{"older_than_ms": 3600000}`), Trigger: workflow.TriggerLocal})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("sweep: %v %v", out.Err, err)
	}
	if fmt.Sprint(out.Output["swept"]) != "1" {
		t.Errorf("swept %v, want only the run Firestore last saw two hours ago", out.Output["swept"])
	}
	for name := range live {
		if r, err := store.GetRun(ctx, name); err != nil || r.Status != ledger.ExtensionRunning {
			t.Errorf("the live app whose clock is %s was touched: %+v %v", name, r, err)
		}
	}
	if r, _ := store.GetRun(ctx, "dead"); r.Outcome != ledger.OutcomeAbandoned {
		t.Errorf("the dead run = %+v, want abandoned", r)
	}
}
