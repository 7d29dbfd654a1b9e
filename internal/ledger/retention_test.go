package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testenv"
)

// A receipt expires the ordinary retention after the decision that wrote it, but never after
// its run: it is written in the transaction that read the run's record, and takes the run's
// expiry when that comes first.
func TestAReceiptExpiresWithItsRunOrBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	keep := ledger.Retention{Ordinary: 48 * time.Hour, Notable: 96 * time.Hour}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}).WithRetention(keep)
	runs := ledger.NewRunStore(fs)
	for _, c := range []struct {
		run       string
		runExpiry time.Time
		want      time.Time
	}{
		{"in-flight", t0.Add(keep.Notable), t0.Add(keep.Ordinary)},                                 // the run's notable expiry is later
		{"finished", t0.Add(-time.Hour).Add(keep.Ordinary), t0.Add(-time.Hour).Add(keep.Ordinary)}, // it finished before
	} {
		if err := runs.CreateRun(ctx, ledger.RunRecord{WorkflowRunUUID: c.run, Status: "completed", InitiatedAt: t0, ExpireAt: c.runExpiry}); err != nil {
			t.Fatal(err)
		}
		row := "row-" + c.run
		if err := store.Put(ctx, ledger.Execution{UUID: row, OrganizationUUID: "org", Provider: ledger.ProviderCloudRun, Active: true, Status: "running",
			ObservedAt: t0.Add(-time.Hour), ProviderRef: map[string]any{"execution": "x"}}); err != nil {
			t.Fatal(err)
		}
		_, dup, err := store.ApplyOnce(ctx, c.run, row, ledger.Reads{Run: c.run}, func(ledger.Execution, ledger.Facts) ledger.ExecutionChange {
			return ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0, Verdict: "running"}
		})
		if err != nil || dup {
			t.Fatalf("%s: %v %v", c.run, dup, err)
		}
		snap, err := fs.Collection(ledger.RunsCollection).Doc(c.run).Collection(ledger.SyncsCollection).Doc(row).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := snap.DataAt(ledger.ExpireField)
		if at, _ := got.(time.Time); !at.Equal(c.want) {
			t.Errorf("%s run: receipt expires %v, want %v", c.run, got, c.want)
		}
	}
}

func TestRetentionValidationNamesTheSettingAndTheRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    ledger.Retention
		want string
	}{
		{ledger.Retention{Ordinary: time.Hour}, "ORD=1h0m0s: must be at least 24h0m0s"},
		{ledger.Retention{Ordinary: 72 * time.Hour, Notable: 48 * time.Hour}, "NOT=48h0m0s: must be at least ORD (72h0m0s)"},
	} {
		if err := c.r.Validate("ORD", "NOT"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
	if err := (ledger.Retention{}).Validate("ORD", "NOT"); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if got := ledger.ExpiryAt(t0, ledger.Retention{}, true); !got.Equal(t0.Add(ledger.RetentionNotableDefault)) {
		t.Errorf("notable expiry by default %v", got)
	}
}
