package sweeptest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// ClockSkew is what the clock suite needs of one sweep: the sweep on fs, reading now from clock
// (the suite gives it Firestore's clock), and a scope of the test's own it readies on fs.
type ClockSkew func(t *testing.T, fs *firestore.Client, clock firestoreconn.Clock) (workflow.Definition, Scope)

// Scope is one scope's rows and the run over it.
type Scope struct {
	// Input is the run's initial data; its staleness threshold is an hour, or a minute less.
	Input json.RawMessage
	// Live writes the row name as a live writer whose clock reads now does: written, then moved
	// (a heartbeat, a movement) once.
	Live func(ctx context.Context, name string, now func() time.Time) error
	// Dead writes the row name as Firestore saw it last at at.
	Dead func(ctx context.Context, name string, at time.Time) error
	// Check fails t unless the run (out) settled the row "dead" and nothing else, and the rows
	// live are as their writers left them.
	Check func(t *testing.T, out workflow.Outcome, live []string)
}

// RunClockSkew checks that writers whose clocks are an hour off either way, moving their rows as
// live writers do, never have them settled: staleness is judged on Firestore's clock, as in
// production (server timestamps, firestoreconn.ServerClock), and the sweep's own process clock (here
// an hour ahead) does not enter it either. A row Firestore last saw two hours ago is settled, so
// the sweep does sweep. It runs in parallel with t's other tests.
func RunClockSkew(t *testing.T, sweep ClockSkew) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ctx := context.Background()
	skewed := func() time.Time { return time.Now().Add(time.Hour) } // the sweep's own clock
	def, s := sweep(t, fs, firestoreconn.ServerClock(fs))
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: skewed, Log: logging.Discard()}, def)

	live := map[string]time.Duration{"behind": -time.Hour, "ahead": time.Hour}
	for name, skew := range live {
		if err := s.Live(ctx, name, func() time.Time { return time.Now().Add(skew) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Dead(ctx, "dead", time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}

	out, err := engine.Start(ctx, workflow.Request{Type: def.Type, InitialData: s.Input, Trigger: workflow.TriggerLocal})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("run: %v %v", out.Err, err)
	}
	s.Check(t, out, []string{"behind", "ahead"})
}
