package memstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

type executionsWorld struct {
	store executionsync.Store
	put   func(ledger.Execution)
	// malformed puts a stale active row of org and provider that does not decode.
	malformed func(id, org, provider string, observed time.Time)
	// invisible puts an active row of org and provider whose observed_at is not a timestamp.
	invisible func(id, org, provider string)
	org       func(id string, enabled bool)
	run       func(id string, f ledger.RunFacts)
	target    func(ledger.Target)
	get       func(id string) ledger.Execution
	receipt   func(run, id string) (ledger.SyncReceipt, bool)
}

func memoryExecutions() executionsWorld {
	s := memstore.NewExecutions()
	return executionsWorld{store: s, put: s.Put,
		malformed: func(id, org, provider string, at time.Time) {
			s.Put(ledger.Execution{UUID: id, OrganizationUUID: org, Provider: provider, Active: true, ObservedAt: at, Malformed: "provider_ref: not a map"})
		},
		invisible: func(id, org, provider string) {
			s.PutInvisible(ledger.Execution{UUID: id, OrganizationUUID: org, Provider: provider, Active: true})
		},
		org: s.PutOrganization, run: s.PutRun, target: s.PutTarget,
		get:     func(id string) ledger.Execution { e, _ := s.Get(id); return e },
		receipt: s.Receipt}
}

func ledgerExecutions(t *testing.T) func(fs *firestore.Client) executionsWorld {
	return func(fs *firestore.Client) executionsWorld {
		s := ledger.NewExecutionStore(fs, txConfig, ledger.Retention{})
		raw := func(id, org, provider string, observed any) map[string]any {
			return map[string]any{"organization_uuid": org, "provider": provider, "active": true, "status": "running",
				"observed_at": observed, "provider_ref": "not-a-map"}
		}
		return executionsWorld{store: s,
			put: func(e ledger.Execution) { set(t, fs, ledger.ExecutionsCollection+"/"+e.UUID, e) },
			malformed: func(id, org, provider string, at time.Time) {
				set(t, fs, ledger.ExecutionsCollection+"/"+id, raw(id, org, provider, at))
			},
			invisible: func(id, org, provider string) {
				set(t, fs, ledger.ExecutionsCollection+"/"+id, raw(id, org, provider, "yesterday"))
			},
			org: func(id string, enabled bool) {
				set(t, fs, ledger.OrganizationsCollection+"/"+id, ledger.Organization{UUID: id, SweepsEnabled: enabled})
			},
			run: func(id string, f ledger.RunFacts) {
				set(t, fs, ledger.RunsCollection+"/"+id, map[string]any{"workflow_type": f.WorkflowType, "status": f.Status,
					"initial_data": map[string]any{"organization_uuid": f.Organization},
					"output":       map[string]any{"started_runner_execution_uuids": f.Started}})
			},
			target: func(tg ledger.Target) { set(t, fs, ledger.TargetsCollection+"/"+ledger.TargetID(tg.Target), tg) },
			get: func(id string) ledger.Execution {
				e, err := s.Get(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return e
			},
			receipt: func(run, id string) (ledger.SyncReceipt, bool) {
				snap, err := fs.Collection(ledger.RunsCollection).Doc(run).Collection(ledger.SyncsCollection).Doc(id).Get(context.Background())
				if !snap.Exists() {
					return ledger.SyncReceipt{}, false
				}
				if err != nil {
					t.Fatal(err)
				}
				var r ledger.SyncReceipt
				if err := snap.DataTo(&r); err != nil {
					t.Fatal(err)
				}
				return r, true
			}}
	}
}

// row is a stale running row of organization "o" on Cloud Run.
func row(id string, observed time.Time) ledger.Execution {
	return ledger.Execution{UUID: id, OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true,
		ObservedAt: observed, ProviderRef: map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/" + id}}
}

// A scan pages an organization's stale active rows of one provider, oldest first and by id,
// marks a row that does not decode, and never sees an invisible one.
func TestExecutionScanPagesAsTheLedgerDoes(t *testing.T) {
	t.Parallel()
	old := t0.Add(-time.Hour)
	implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
		ctx := context.Background()
		w.put(row("b", old))
		w.put(row("a", old))
		w.put(row("c", old.Add(time.Minute)))
		w.put(row("at-horizon", t0))
		w.put(row("fresh", t0.Add(time.Second)))
		inactive := row("inactive", old)
		inactive.Active, inactive.Status = false, ledger.StatusSucceeded
		w.put(inactive)
		other := row("other-org", old)
		other.OrganizationUUID = "o2"
		w.put(other)
		kube := row("kube", old)
		kube.Provider = ledger.ProviderKubernetes
		w.put(kube)
		w.malformed("bad", "o", ledger.ProviderCloudRun, old.Add(30*time.Second))
		w.invisible("inv-1", "o", ledger.ProviderCloudRun)
		w.invisible("inv-2", "o2", ledger.ProviderCloudRun)

		var ids []string
		var after *ledger.Cursor
		for page := 0; ; page++ {
			rows, cur, err := w.store.Scan(ctx, ledger.ScanQuery{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Horizon: t0, PageSize: 2, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				ids = append(ids, r.UUID)
				if (r.Malformed != "") != (r.UUID == "bad") {
					t.Errorf("row %s malformed %q", r.UUID, r.Malformed)
				}
			}
			if len(rows) < 2 {
				break
			}
			if cur == nil || cur.ID != rows[len(rows)-1].UUID {
				t.Fatalf("page %d: cursor %+v after %v", page, cur, rows)
			}
			after = cur
		}
		if want := []string{"a", "b", "bad", "c", "at-horizon"}; !slices.Equal(ids, want) {
			t.Errorf("scanned %v, want %v", ids, want)
		}
		inv, err := w.store.Invisible(ctx, "o", ledger.ProviderCloudRun)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Count != 1 || !slices.Equal(inv.Sample, []string{"inv-1"}) {
			t.Errorf("invisible %+v, want inv-1 only", inv)
		}
		if _, _, err := w.store.Scan(ctx, ledger.ScanQuery{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Horizon: t0}); err == nil {
			t.Error("a scan without a page size did not fail")
		}
	})
}

// A batch probe finds the organizations a scan would find a row of, whatever rows the others
// hold, and asks for at most firestoreconn.InMax at once.
func TestStaleOrganizationsFindsWhatAScanWould(t *testing.T) {
	t.Parallel()
	old := t0.Add(-time.Hour)
	implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
		ctx := context.Background()
		in := func(id, org string, observed time.Time) ledger.Execution {
			r := row(id, observed)
			r.OrganizationUUID = org
			return r
		}
		for i := range 5 { // many stale rows, older than every other organization's
			w.put(in(fmt.Sprintf("busy-%d", i), "busy", old.Add(-time.Duration(i)*time.Minute)))
		}
		w.put(in("late", "late", old))
		w.put(in("edge", "edge", t0)) // observed exactly at the horizon
		w.put(in("fresh", "fresh", t0.Add(time.Second)))
		settled := in("settled", "settled", old)
		settled.Active, settled.Status = false, ledger.StatusSucceeded
		w.put(settled)
		kube := in("kube", "kube", old)
		kube.Provider = ledger.ProviderKubernetes
		w.put(kube)
		w.malformed("bad", "malformed", ledger.ProviderCloudRun, old)
		w.invisible("inv", "invisible", ledger.ProviderCloudRun)
		w.put(in("unasked", "unasked", old))

		asked := []string{"busy", "late", "edge", "fresh", "settled", "kube", "malformed", "invisible", "empty", "busy"}
		got, err := w.store.StaleOrganizations(ctx, asked, ledger.ProviderCloudRun, t0)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if want := []string{"busy", "edge", "late", "malformed"}; !slices.Equal(got, want) {
			t.Errorf("stale organizations %v, want %v", got, want)
		}
		if got, err := w.store.StaleOrganizations(ctx, []string{"fresh", "empty"}, ledger.ProviderCloudRun, t0); err != nil || len(got) != 0 {
			t.Errorf("quiet organizations read as %v, %v; want none", got, err)
		}
		many := make([]string, firestoreconn.InMax+1)
		for i := range many {
			many[i] = fmt.Sprint("o", i)
		}
		if _, err := w.store.StaleOrganizations(ctx, many, ledger.ProviderCloudRun, t0); err == nil {
			t.Errorf("%d organizations asked at once did not fail", len(many))
		}
	})
}

// Apply hands decide the row and what reads names as its transaction read them, and writes what
// each kind of change writes, field by field.
func TestApplyReadsAndWritesAsTheLedgerDoes(t *testing.T) {
	old := t0.Add(-time.Hour)
	finished := t0.Add(-2 * time.Minute)
	settlement := &ledger.Settlement{At: t0, WorkflowRunUUID: "run", Reason: "executor_succeeded", Evidence: map[string]any{"etag": "e"}}
	for _, c := range []struct {
		name   string
		before func(*ledger.Execution)
		change ledger.ExecutionChange
		check  func(t *testing.T, e ledger.Execution)
	}{
		{name: "settle", before: func(e *ledger.Execution) {
			e.Sync.UnknownSince, e.Sync.PendingOutcome, e.Sync.Attempts = old, "succeeded", 2
		}, change: ledger.ExecutionChange{Kind: ledger.ChangeSettle, At: t0, Verdict: "succeeded", Status: ledger.StatusSucceeded,
			Outcome: ledger.OutcomeSucceeded, CompletedAt: finished, FailureReason: "why", Settlement: settlement, Target: "p/l"},
			check: func(t *testing.T, e ledger.Execution) {
				if e.Active || e.Status != ledger.StatusSucceeded || e.Outcome != ledger.OutcomeSucceeded || !e.CompletedAt.Equal(finished) ||
					e.FailureReason != "why" || e.Settlement == nil || e.Settlement.Reason != settlement.Reason || !e.Settlement.At.Equal(t0) ||
					!e.Sync.LastSyncedAt.Equal(t0) || e.Sync.LastVerdict != "succeeded" || !e.Sync.UnknownSince.IsZero() ||
					e.Sync.PendingOutcome != "" || e.Sync.Attempts != 3 || e.Sync.Target != "p/l" || !e.ObservedAt.Equal(old) {
					t.Errorf("after settle: %+v", e)
				}
			}},
		{name: "refresh with an outcome pending", before: func(e *ledger.Execution) { e.Sync.UnknownSince = old },
			change: ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0, Verdict: "running", PendingOutcome: "failed",
				Snapshot: map[string]any{"seen": "x"}, Target: "p/l"},
			check: func(t *testing.T, e ledger.Execution) {
				if !e.Active || !e.ObservedAt.Equal(t0) || !e.Sync.LastSyncedAt.Equal(t0) || e.Sync.LastVerdict != "running" ||
					!e.Sync.UnknownSince.IsZero() || e.Sync.PendingOutcome != "failed" || e.Sync.LastSnapshot["seen"] != "x" ||
					e.Sync.Attempts != 1 || e.Sync.Target != "p/l" {
					t.Errorf("after refresh: %+v", e)
				}
			}},
		{name: "refresh clears a pending outcome and keeps the last snapshot", before: func(e *ledger.Execution) {
			e.Sync.PendingOutcome, e.Sync.LastSnapshot, e.Sync.Target = "failed", map[string]any{"seen": "before"}, "p/l"
		}, change: ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0, Verdict: "running"},
			check: func(t *testing.T, e ledger.Execution) {
				if e.Sync.PendingOutcome != "" || e.Sync.LastSnapshot["seen"] != "before" || e.Sync.Target != "p/l" {
					t.Errorf("after refresh: %+v", e)
				}
			}},
		{name: "unknown", change: ledger.ExecutionChange{Kind: ledger.ChangeUnknown, At: t0, Verdict: "unknown", UnknownSince: old},
			check: func(t *testing.T, e ledger.Execution) {
				if !e.Active || !e.ObservedAt.Equal(old) || !e.Sync.UnknownSince.Equal(old) || e.Sync.LastVerdict != "unknown" || e.Sync.Attempts != 1 {
					t.Errorf("after unknown: %+v", e)
				}
			}},
		{name: "error", change: ledger.ExecutionChange{Kind: ledger.ChangeError, At: t0, Error: "Unavailable: down"},
			check: func(t *testing.T, e ledger.Execution) {
				if e.Sync.LastError != "Unavailable: down" || !e.Sync.LastErrorAt.Equal(t0) || e.Sync.Attempts != 1 || !e.Sync.LastSyncedAt.IsZero() {
					t.Errorf("after error: %+v", e)
				}
			}},
		{name: "none writes nothing", change: ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: "observed_at_moved"},
			check: func(t *testing.T, e ledger.Execution) {
				if e.Sync.Attempts != 0 || !e.Sync.LastSyncedAt.IsZero() {
					t.Errorf("after none: %+v", e)
				}
			}},
		{name: "refused writes nothing", change: ledger.ExecutionChange{Kind: ledger.ChangeRefused, Why: "organization_mismatch"},
			check: func(t *testing.T, e ledger.Execution) {
				if e.Sync.Attempts != 0 || !e.Sync.LastSyncedAt.IsZero() || !e.Active {
					t.Errorf("after refused: %+v", e)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
				r := row("r", old)
				if c.before != nil {
					c.before(&r)
				}
				w.put(r)
				var read ledger.Execution
				got, err := w.store.Apply(context.Background(), "r", ledger.Reads{}, func(e ledger.Execution, _ ledger.Facts) ledger.ExecutionChange {
					read = e
					return c.change
				})
				if err != nil {
					t.Fatal(err)
				}
				if got.Kind != c.change.Kind || got.Why != c.change.Why {
					t.Errorf("applied %s %q, want %s %q", got.Kind, got.Why, c.change.Kind, c.change.Why)
				}
				if read.UUID != "r" || read.OrganizationUUID != "o" || !read.ObservedAt.Equal(old) || read.ProviderRef["execution"] == nil {
					t.Errorf("decide read %+v", read)
				}
				c.check(t, w.get("r"))
			})
		})
	}
}

// The facts a transaction reads: the organization's opt-out, the run record's fields and the
// target's judgment, each absent when not named or not there.
func TestApplyReadsTheFactsAsTheLedgerDoes(t *testing.T) {
	t.Parallel()
	implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
		w.put(row("r", t0.Add(-time.Hour)))
		w.org("on", true)
		w.org("off", false)
		w.run("run", ledger.RunFacts{WorkflowType: "execution_sync.cloud_run", Status: "completed", Organization: "o", Started: []string{"r", "s"}})
		w.target(ledger.Target{Target: "projects/p/locations/l", Blind: true, JudgedAt: t0, Asked: 10, Unknown: 9})
		for _, c := range []struct {
			reads ledger.Reads
			want  string
		}{
			{reads: ledger.Reads{}, want: "org=false run=<nil> target=<nil>"},
			{reads: ledger.Reads{Organization: "on"}, want: "org=true run=<nil> target=<nil>"},
			{reads: ledger.Reads{Organization: "off"}, want: "org=false run=<nil> target=<nil>"},
			{reads: ledger.Reads{Organization: "missing"}, want: "org=false run=<nil> target=<nil>"},
			{reads: ledger.Reads{Run: "run"}, want: "org=false run=execution_sync.cloud_run/completed/o/[r s] target=<nil>"},
			{reads: ledger.Reads{Run: "nope"}, want: "org=false run=<nil> target=<nil>"},
			{reads: ledger.Reads{Target: "projects/p/locations/l"}, want: "org=false run=<nil> target=projects/p/locations/l blind=true asked=10 unknown=9"},
			{reads: ledger.Reads{Target: "projects/p/locations/other"}, want: "org=false run=<nil> target=<nil>"},
		} {
			var got string
			if _, err := w.store.Apply(context.Background(), "r", c.reads, func(_ ledger.Execution, f ledger.Facts) ledger.ExecutionChange {
				got = fmt.Sprintf("org=%v run=", f.OrganizationEnabled)
				if f.Run == nil {
					got += "<nil>"
				} else {
					got += fmt.Sprintf("%s/%s/%s/%v", f.Run.WorkflowType, f.Run.Status, f.Run.Organization, f.Run.Started)
				}
				if f.Target == nil {
					got += " target=<nil>"
				} else {
					got += fmt.Sprintf(" target=%s blind=%v asked=%d unknown=%d", f.Target.Target, f.Target.Blind, f.Target.Asked, f.Target.Unknown)
				}
				return ledger.ExecutionChange{Kind: ledger.ChangeNone}
			}); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("reads %+v: facts %s, want %s", c.reads, got, c.want)
			}
		}
	})
}

// ApplyOnce leaves a receipt with every decision but an error, a refusal and a missing row; a
// second delivery finds it and writes nothing.
func TestApplyOnceKeepsReceiptsAsTheLedgerDoes(t *testing.T) {
	old := t0.Add(-time.Hour)
	for _, c := range []struct {
		name        string
		missing     bool
		change      ledger.ExecutionChange
		wantReceipt bool
	}{
		{name: "settle", change: ledger.ExecutionChange{Kind: ledger.ChangeSettle, At: t0, Verdict: "failed", Status: ledger.StatusFailed,
			Outcome: ledger.OutcomeFailed, CompletedAt: t0, Settlement: &ledger.Settlement{At: t0, Reason: "executor_failed"}}, wantReceipt: true},
		{name: "refresh", change: ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0, Verdict: "running"}, wantReceipt: true},
		{name: "none", change: ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: "not_active"}, wantReceipt: true},
		{name: "error", change: ledger.ExecutionChange{Kind: ledger.ChangeError, At: t0, Error: "Unavailable: x"}},
		{name: "refused", change: ledger.ExecutionChange{Kind: ledger.ChangeRefused, Why: "run_missing"}},
		{name: "missing row", missing: true, change: ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
				ctx := context.Background()
				if !c.missing {
					w.put(row("r", old))
				}
				calls := 0
				decide := func(ledger.Execution, ledger.Facts) ledger.ExecutionChange { calls++; return c.change }
				got, dup, err := w.store.ApplyOnce(ctx, "run", "r", ledger.Reads{}, decide)
				if err != nil {
					t.Fatal(err)
				}
				if dup {
					t.Fatal("a first delivery was a duplicate")
				}
				wantKind := c.change.Kind
				if c.missing {
					wantKind = ledger.ChangeNone
				}
				if got.Kind != wantKind {
					t.Errorf("applied %s, want %s", got.Kind, wantKind)
				}
				rc, ok := w.receipt("run", "r")
				if ok != c.wantReceipt {
					t.Fatalf("receipt after the first delivery: %v, want %v", ok, c.wantReceipt)
				}
				if ok && (rc.RunnerExecutionUUID != "r" || rc.Change != string(c.change.Kind) || rc.Why != c.change.Why ||
					rc.Outcome != c.change.Outcome || rc.Verdict != c.change.Verdict || !rc.At.Equal(c.change.At)) {
					t.Errorf("receipt %+v for change %+v", rc, c.change)
				}
				_, dup, err = w.store.ApplyOnce(ctx, "run", "r", ledger.Reads{}, decide)
				if err != nil {
					t.Fatal(err)
				}
				if dup != c.wantReceipt {
					t.Errorf("second delivery duplicate %v, want %v", dup, c.wantReceipt)
				}
				if c.missing {
					if calls != 0 {
						t.Errorf("decide ran %d times on a missing row", calls)
					}
					return
				}
				if want := map[bool]int{true: 1, false: 2}[c.wantReceipt]; calls != want {
					t.Errorf("decide ran %d times, want %d", calls, want)
				}
				if want := map[bool]int64{true: 1, false: 2}[c.wantReceipt]; c.change.Kind != ledger.ChangeRefused && c.change.Kind != ledger.ChangeNone &&
					w.get("r").Sync.Attempts != want {
					t.Errorf("attempts after two deliveries %d, want %d", w.get("r").Sync.Attempts, want)
				}
				if _, ok := w.receipt("other-run", "r"); ok {
					t.Error("a receipt of another run exists")
				}
			})
		})
	}
}

// A row that does not decode fails its transaction and nothing is written.
func TestApplyToAMalformedRowFails(t *testing.T) {
	t.Parallel()
	implementations(t, memoryExecutions, ledgerExecutions(t), func(t *testing.T, w executionsWorld) {
		w.malformed("bad", "o", ledger.ProviderCloudRun, t0)
		_, _, err := w.store.ApplyOnce(context.Background(), "run", "bad", ledger.Reads{}, func(ledger.Execution, ledger.Facts) ledger.ExecutionChange {
			t.Error("decide ran on a row that does not decode")
			return ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: t0}
		})
		if err == nil {
			t.Error("apply to a malformed row did not fail")
		}
		if _, ok := w.receipt("run", "bad"); ok {
			t.Error("a failed transaction left a receipt")
		}
	})
}
