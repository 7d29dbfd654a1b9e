package runssweep_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Apps whose clocks are an hour off either way, moving as a live app does, are never abandoned;
// a run Firestore last saw two hours ago is (sweeptest.RunClockSkew).
func TestAppsAndSweepersWithClocksAnHourOffChangeNothing(t *testing.T) {
	t.Parallel()
	var store *ledger.ExtensionRunStore
	sweeptest.RunClockSkew(t, sweeptest.ClockSkew{
		New: func(fs *firestore.Client, clock ledger.Clock) workflow.Definition {
			store = ledger.NewExtensionRunStore(fs, ledger.TxConfig{})
			return runssweep.New(store, runssweep.Config{}, clock).Definition()
		},
		Scope: func(t *testing.T, fs *firestore.Client) sweeptest.Scope {
			tenant := "tenant-" + uuid.NewString()[:8]
			run := func(name string) ledger.ExtensionRun {
				return ledger.ExtensionRun{RunID: name, TenantID: tenant, ExtensionID: name, JobName: "j", Background: true}
			}
			return sweeptest.Scope{
				// An hour's deadline: any clock an hour off on either side would cross it.
				Input: []byte(`{"older_than_ms": 3600000}`),
				Live: func(ctx context.Context, name string, now func() time.Time) error {
					writer := ledgertest.ExtensionRuns{Client: fs}
					if err := writer.Start(ctx, run(name), now()); err != nil {
						return err
					}
					return writer.Move(ctx, name)
				},
				Dead: func(ctx context.Context, name string, at time.Time) error {
					return ledgertest.ExtensionRuns{Client: fs, Now: testenv.Fixed(at)}.Start(ctx, run(name), time.Now())
				},
				Check: func(t *testing.T, out workflow.Outcome, live []string) {
					ctx := context.Background()
					if fmt.Sprint(out.Output["swept"]) != "1" {
						t.Errorf("swept %v, want only the run Firestore last saw two hours ago", out.Output["swept"])
					}
					for _, name := range live {
						if r, err := ledgertest.Value(store.Row(ctx, name)); err != nil || r.Status != ledger.ExtensionRunning {
							t.Errorf("the live app whose clock is %s was touched: %+v %v", name, r, err)
						}
					}
					if r, _ := ledgertest.Value(store.Row(ctx, "dead")); r.Outcome != ledger.OutcomeAbandoned {
						t.Errorf("the dead run = %+v, want abandoned", r)
					}
				},
			}
		},
	})
}
