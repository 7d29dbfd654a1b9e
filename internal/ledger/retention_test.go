package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// A receipt expires the ordinary retention after the decision that wrote it, but never after
// its run: it is written in the transaction that read the run's record, and takes the run's
// expiry when that comes first.
func TestAReceiptExpiresWithItsRunOrBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	keep := ledger.Retention{Ordinary: 48 * time.Hour, Notable: 96 * time.Hour}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, keep)
	runner := ledgertest.Executions{Client: fs}
	runs := runstore.New(fs)
	for _, c := range []struct {
		run       string
		runExpiry time.Time
		want      time.Time
	}{
		{"in-flight", t0.Add(keep.Notable), t0.Add(keep.Ordinary)},                                 // the run's notable expiry is later
		{"finished", t0.Add(-time.Hour).Add(keep.Ordinary), t0.Add(-time.Hour).Add(keep.Ordinary)}, // it finished before
	} {
		if err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: c.run, Status: "completed", InitiatedAt: t0, ExpireAt: c.runExpiry}); err != nil {
			t.Fatal(err)
		}
		row := "row-" + c.run
		if err := runner.Put(ctx, ledger.Execution{UUID: row, OrganizationUUID: "org", Provider: ledger.ProviderCloudRun, Active: true, Status: "running",
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
	if got := ledger.ExpiryAt(t0, ledger.Retention{}, true); !got.Equal(t0.Add(ledger.Retention{}.WithDefaults().Notable)) {
		t.Errorf("notable expiry by default %v", got)
	}
}

// On the pipeline path a run's syncs settle rows after the run may have finished: the first
// that settles one lost marks the record notable and moves its expiry, and the finish keeps the
// notable retention for it.
func TestASyncThatSettlesLostKeepsItsRunForTheNotableRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	keep := ledger.Retention{Ordinary: 48 * time.Hour, Notable: 96 * time.Hour}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, keep)
	runner := ledgertest.Executions{Client: fs}
	runs := runstore.New(fs)
	if err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: "run", Status: "reconciling", InitiatedAt: t0, ExpireAt: t0.Add(keep.Notable)}); err != nil {
		t.Fatal(err)
	}
	// It finishes first, ordinary as far as it knows.
	if err := runs.TransitionRun(ctx, "run", []string{"reconciling"}, "completed", t0, runstore.RunUpdate{
		CompletedAt: t0, ExpireAt: t0.Add(keep.Ordinary), NotableExpireAt: t0.Add(keep.Notable)}); err != nil {
		t.Fatal(err)
	}
	settle := func(row string, at time.Time, outcome string) {
		t.Helper()
		if err := runner.Put(ctx, ledger.Execution{UUID: row, OrganizationUUID: "org", Provider: ledger.ProviderCloudRun, Active: true, Status: "running",
			ObservedAt: t0.Add(-time.Hour), ProviderRef: map[string]any{"execution": "x"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.ApplyOnce(ctx, "run", row, ledger.Reads{Run: "run"}, func(ledger.Execution, ledger.Facts) ledger.ExecutionChange {
			return ledger.ExecutionChange{Kind: ledger.ChangeSettle, At: at, Status: "failed", Outcome: outcome, Verdict: "unknown", CompletedAt: at}
		}); err != nil {
			t.Fatal(err)
		}
	}
	expiry := func() time.Time {
		rec, err := runs.GetRun(ctx, "run")
		if err != nil {
			t.Fatal(err)
		}
		return rec.ExpireAt
	}
	settle("ok", t0.Add(time.Minute), "failed")
	if got := expiry(); !got.Equal(t0.Add(keep.Ordinary)) {
		t.Errorf("after a failed settlement the run expires %v, want its ordinary %v", got, t0.Add(keep.Ordinary))
	}
	settle("lost-1", t0.Add(2*time.Minute), ledger.OutcomeLost)
	settle("lost-2", t0.Add(3*time.Minute), ledger.OutcomeLost) // the record is marked: not written again
	if got, want := expiry(), t0.Add(2*time.Minute).Add(keep.Notable); !got.Equal(want) {
		t.Errorf("after a lost settlement the run expires %v, want %v", got, want)
	}

	// A run marked notable before it finishes keeps the notable retention from its finish.
	if err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: "run2", Status: "reconciling", InitiatedAt: t0, ExpireAt: t0.Add(keep.Notable)}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Collection(ledger.RunsCollection).Doc("run2").Update(ctx, []firestore.Update{{Path: ledger.RunNotable, Value: true}}); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	if err := runs.TransitionRun(ctx, "run2", []string{"reconciling"}, "completed", end, runstore.RunUpdate{
		CompletedAt: end, ExpireAt: end.Add(keep.Ordinary), NotableExpireAt: end.Add(keep.Notable)}); err != nil {
		t.Fatal(err)
	}
	if rec, err := runs.GetRun(ctx, "run2"); err != nil || !rec.ExpireAt.Equal(end.Add(keep.Notable)) {
		t.Errorf("a run marked notable finished to expire %v (%v), want %v", rec.ExpireAt, err, end.Add(keep.Notable))
	}
}

// The blind-executor judgments and the roster carry their expiry too: a judgment the retention
// after it was made (notable while blind), a clearance the ordinary one, the roster's documents
// the ordinary one after they were built.
func TestJudgmentsAndTheRosterExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	keep := ledger.Retention{Ordinary: 48 * time.Hour, Notable: 96 * time.Hour}
	expiry := func(path string) time.Time {
		t.Helper()
		snap, err := fs.Doc(path).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := snap.DataAt(ledger.ExpireField)
		at, _ := v.(time.Time)
		return at
	}
	targets := targetstore.New(fs, keep)
	const target = "cloud_run:projects/p/locations/l"
	path := ledger.TargetsCollection + "/" + ledger.TargetID(target)
	if _, err := targets.Record(ctx, ledger.Target{Target: target, Blind: true, JudgedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if got := expiry(path); !got.Equal(t0.Add(keep.Notable)) {
		t.Errorf("a blind judgment expires %v, want %v", got, t0.Add(keep.Notable))
	}
	if err := targets.Clear(ctx, target, "ops", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, want := expiry(path), t0.Add(time.Hour).Add(keep.Ordinary); !got.Equal(want) {
		t.Errorf("a clearance expires %v, want %v", got, want)
	}

	roster := rosterstore.New(fs, keep, testenv.Fixed(t0))
	if err := roster.PutShards(ctx, "v1", "", []string{"org-a", "org-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := roster.Finish(ctx, rosterstore.Roster{Version: "v1", BuiltAt: t0.Add(time.Minute), Last: "org-b"}); err != nil {
		t.Fatal(err)
	}
	if got, want := expiry(ledger.RosterCollection+"/current"), t0.Add(time.Minute).Add(keep.Ordinary); !got.Equal(want) {
		t.Errorf("the roster expires %v, want %v", got, want)
	}
	shards, err := fs.Collection(ledger.RosterCollection).Where("shard_of", "==", "v1").Documents(ctx).GetAll()
	if err != nil || len(shards) != 1 {
		t.Fatalf("shards: %d, %v", len(shards), err)
	}
	if got := expiry(shards[0].Ref.Path[strings.Index(shards[0].Ref.Path, "/documents/")+len("/documents/"):]); !got.Equal(t0.Add(keep.Ordinary)) {
		t.Errorf("a shard expires %v, want %v", got, t0.Add(keep.Ordinary))
	}
}
