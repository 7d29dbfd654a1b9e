package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestScanSelectsStaleActiveRowsOfOneOrganizationAndProviderOldestFirst(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	runner := ledgertest.Executions{Client: fs}
	ctx := context.Background()
	put := func(id, org, provider string, active bool, observed time.Time) {
		t.Helper()
		err := runner.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: provider, Active: active, Status: "running",
			ObservedAt: observed, ProviderRef: map[string]any{"execution": "x"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("a3", "org", ledger.ProviderCloudRun, true, t0.Add(-3*time.Minute))
	put("a1", "org", ledger.ProviderCloudRun, true, t0.Add(-9*time.Minute))
	put("a2b", "org", ledger.ProviderCloudRun, true, t0.Add(-5*time.Minute))
	put("a2a", "org", ledger.ProviderCloudRun, true, t0.Add(-5*time.Minute)) // same time: id breaks the tie
	put("edge", "org", ledger.ProviderCloudRun, true, t0)                    // exactly at the horizon: stale
	put("fresh", "org", ledger.ProviderCloudRun, true, t0.Add(time.Second))
	put("done", "org", ledger.ProviderCloudRun, false, t0.Add(-time.Hour))
	put("k8s", "org", ledger.ProviderKubernetes, true, t0.Add(-time.Hour))
	put("other", "org2", ledger.ProviderCloudRun, true, t0.Add(-time.Hour))
	spy.Reset()

	var got []string
	var after *ledger.Cursor
	pages := 0
	for {
		rows, cur, err := store.Scan(ctx, ledger.ScanQuery{OrganizationUUID: "org", Provider: ledger.ProviderCloudRun, Horizon: t0, PageSize: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rows {
			got = append(got, r.UUID)
		}
		if len(rows) < 2 {
			break
		}
		after = cur
	}
	if want := []string{"a1", "a2a", "a2b", "a3", "edge"}; !slices.Equal(got, want) {
		t.Errorf("scan = %v, want %v", got, want)
	}
	if pages != 3 {
		t.Errorf("pages = %d, want 3", pages)
	}
	if reads := len(spy.Reads()); reads != 5 {
		t.Errorf("documents read = %d, want 5: the scan must read only what it returns", reads)
	}
}

func TestScanMarksUndecodableRowsInsteadOfFailing(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	runner := ledgertest.Executions{Client: fs}
	ctx := context.Background()
	_, err := fs.Collection(ledger.ExecutionsCollection).Doc("bad").Set(ctx, map[string]any{
		"organization_uuid": "org", "provider": "cloud_run", "active": true, "observed_at": t0.Add(-time.Hour),
		"provider_ref": "not-a-map", "status": 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Put(ctx, ledger.Execution{UUID: "good", OrganizationUUID: "org", Provider: "cloud_run", Active: true, ObservedAt: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rows, cur, err := store.Scan(ctx, ledger.ScanQuery{OrganizationUUID: "org", Provider: "cloud_run", Horizon: t0, PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].UUID != "bad" || rows[0].Malformed == "" || rows[1].Malformed != "" {
		t.Fatalf("rows = %+v", rows)
	}
	if cur == nil || cur.ID != "good" {
		t.Errorf("cursor = %+v, want after good", cur)
	}
}

func TestApplyOnAMissingRowWritesNothing(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	called := false
	ch, err := store.Apply(context.Background(), "nope", ledger.Reads{}, func(ledger.Execution, ledger.Facts) ledger.ExecutionChange {
		called = true
		return ledger.ExecutionChange{Kind: ledger.ChangeSettle}
	})
	if err != nil {
		t.Fatal(err)
	}
	if called || ch.Kind != ledger.ChangeNone || ch.Why != "row_missing" {
		t.Errorf("change = %+v, decide called %t", ch, called)
	}
	if len(spy.Writes()) != 0 {
		t.Errorf("writes = %v", spy.Writes())
	}
}

func TestApplyWritesOnlyWhatTheChangeSays(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	runner := ledgertest.Executions{Client: fs}
	ctx := context.Background()
	if err := runner.Put(ctx, ledger.Execution{UUID: "r", OrganizationUUID: "o", Provider: "cloud_run", Active: true, Status: "running",
		ObservedAt: t0.Add(-time.Hour), Sync: ledger.SyncState{Attempts: 2, UnknownSince: t0.Add(-time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	spy.Reset()
	_, err := store.Apply(ctx, "r", ledger.Reads{}, func(ledger.Execution, ledger.Facts) ledger.ExecutionChange {
		return ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0, Verdict: "running"}
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if !r.ObservedAt.Equal(t0) || r.Sync.Attempts != 3 || !r.Sync.UnknownSince.IsZero() || !r.Active || r.Status != "running" {
		t.Errorf("after refresh: %+v", r)
	}
	w := spy.Writes()
	if len(w) != 1 || slices.Contains(w[0].Fields, "status") || slices.Contains(w[0].Fields, "settlement") {
		t.Errorf("refresh wrote %+v", w)
	}
}
