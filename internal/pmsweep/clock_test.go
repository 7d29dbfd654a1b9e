package pmsweep_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Workers whose clocks are an hour off either way, heartbeating as a live worker does, are never
// reclaimed; a task Firestore last saw two hours ago is (sweeptest.RunClockSkew).
func TestWorkersAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	var tasks *ledger.TaskStore
	sweeptest.RunClockSkew(t, sweeptest.ClockSkew{
		New: func(fs *firestore.Client, clock ledger.Clock) workflow.Definition {
			tasks = ledger.NewTaskStore(fs, ledger.TxConfig{})
			return pmsweep.New(tasks, pmsweep.Config{}, clock).Definition()
		},
		Scope: func(t *testing.T, fs *firestore.Client) sweeptest.Scope {
			queue := "q-" + uuid.NewString()[:8]
			// A TTL of an hour less a minute: any clock an hour off on either side would cross it.
			raw, _ := json.Marshal(pmsweep.Input{Queue: queue, TTL: 3540, Reclaimer: "janitor"})
			return sweeptest.Scope{
				Input: raw,
				Live: func(ctx context.Context, name string, worker func() time.Time) error {
					if err := (ledgertest.Tasks{Client: fs}).Enqueue(ctx, queue, name, name, worker()); err != nil {
						return err
					}
					l, err := ledgertest.Tasks{Client: fs}.Next(ctx, queue, "worker-"+name, worker())
					if err != nil {
						return err
					}
					_, err = ledgertest.Tasks{Client: fs}.Heartbeat(ctx, l, worker())
					return err
				},
				Dead: func(ctx context.Context, name string, at time.Time) error {
					longAgo := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(at)}
					if err := longAgo.Enqueue(ctx, queue, name, name, time.Now()); err != nil {
						return err
					}
					_, err := longAgo.Next(ctx, queue, "worker-"+name, time.Now())
					return err
				},
				Check: func(t *testing.T, out workflow.Outcome, live []string) {
					var o pmsweep.Output
					testenv.Decode(t, out.Output, &o)
					if o.Scanned != 3 || len(o.Reclaimed) != 1 || o.Reclaimed[0].Task != "dead" || len(o.Raced) != 0 {
						t.Errorf("output %+v, want only the task Firestore last saw two hours ago reclaimed", o)
					}
					for _, name := range live {
						if task, err := ledgertest.Value(tasks.Row(context.Background(), queue, name)); err != nil || task.Status != ledger.TaskWorking || task.ReclaimCount != 0 {
							t.Errorf("the live worker whose clock is %s lost its task: %+v %v", name, task, err)
						}
					}
				},
			}
		},
	})
}
