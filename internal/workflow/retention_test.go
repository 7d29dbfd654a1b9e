package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// A run record carries the notable expiry while the run is in flight (so one that never
// finishes still expires), as does the guard it holds; when it finishes, the ordinary expiry
// from then, or the notable one if it failed, settled a row lost or was held back by the
// blind-executor guard.
func TestARunRecordExpiresAfterTheRetentionItsOutcomeEarns(t *testing.T) {
	t.Parallel()
	keep := ledger.Retention{Ordinary: 48 * time.Hour, Notable: 96 * time.Hour}
	for _, c := range []struct {
		name    string
		stats   map[string]any
		err     error
		notable bool
	}{
		{name: "ordinary", stats: map[string]any{"settled": map[string]int{"succeeded": 3, "lost": 0}, "blind": map[string]int{}}},
		{name: "settled lost", stats: map[string]any{"settled": map[string]int{"lost": 1}}, notable: true},
		{name: "held back by the blind-executor guard", stats: map[string]any{"blind": map[string]int{"cloud_run:projects/p/locations/l": 2}}, notable: true},
		{name: "failed", err: errors.New("boom"), notable: true},
		{name: "tripped the storm guard", err: &workflow.StepError{Step: "storm", Layer: "workflow", Reason: "storm_guard", Err: errors.New("storm guard")}, notable: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := testenv.Firestore(t, fsspy.New().DialOptions()...)
			clock := testenv.NewClock(epoch)
			start := clock.Now()
			runs := runstore.New(fs)
			var inFlight, guardExpiry time.Time
			eng := workflow.NewEngine(workflow.Options{Runs: runs, Guards: runstore.NewGuardStore(fs), GuardTTL: time.Minute, Retention: keep, Now: clock.Now, Log: logging.Discard()},
				workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear,
					Body: func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
						rec, err := runs.GetRun(ctx, run.UUID)
						if err != nil {
							return workflow.Result{}, err
						}
						inFlight = rec.ExpireAt
						snap, err := fs.Collection(ledger.GuardsCollection).Doc(runstore.GuardKey(string(run.Type), org)).Get(ctx)
						if err != nil {
							return workflow.Result{}, err
						}
						v, _ := snap.DataAt(ledger.ExpireField)
						guardExpiry, _ = v.(time.Time)
						clock.Advance(time.Hour)
						return workflow.Result{Stats: c.stats}, c.err
					}})
			out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: validInput, Trigger: workflow.TriggerLocal})
			if err != nil {
				t.Fatal(err)
			}
			if !inFlight.Equal(start.Add(keep.Notable)) || !guardExpiry.Equal(start.Add(keep.Notable)) {
				t.Errorf("in flight: record expires %v, guard %v; want both %v", inFlight, guardExpiry, start.Add(keep.Notable))
			}
			rec, err := runs.GetRun(context.Background(), out.RunUUID)
			if err != nil {
				t.Fatal(err)
			}
			want := start.Add(time.Hour).Add(keep.Ordinary)
			if c.notable {
				want = start.Add(time.Hour).Add(keep.Notable)
			}
			if !rec.ExpireAt.Equal(want) {
				t.Errorf("%s run (%s) expires %v, want %v", c.name, rec.Status, rec.ExpireAt, want)
			}
		})
	}
}

func TestNotableRunsAreTheFailedTheLostAndTheHeldBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status string
		stats  map[string]any
		want   bool
	}{
		{"completed", nil, false},
		{"completed", map[string]any{"settled": map[string]any{"succeeded": int64(4), "lost": int64(0)}}, false},
		{"completed", map[string]any{"settled": int64(4)}, false}, // lease settle's count
		{"completed", map[string]any{"settled": map[string]any{"lost": int64(1)}}, true},
		{"completed", map[string]any{"blind": map[string]any{"kubernetes:c": int64(1)}}, true},
		{"completed", map[string]any{"blind": map[string]any{"kubernetes:c": int64(0)}}, false},
		{"failed", nil, true},
	} {
		if got := workflow.Notable(c.status, c.stats); got != c.want {
			t.Errorf("Notable(%s, %v) = %v, want %v", c.status, c.stats, got, c.want)
		}
	}
}
