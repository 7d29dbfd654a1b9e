package executionsync_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
)

// observer is the event path over e's store, fake and syncer, as the app wires it.
func (e *env) observer() *executionsync.Observer {
	run, kube := cloudrun.Signal, kubejobs.Signal
	run.Provider, kube.Provider = ledger.ProviderCloudRun, ledger.ProviderKubernetes
	return executionsync.NewObserver(executionsync.ObserverConfig{Rows: e.store, Signals: []logentry.Signal{run, kube},
		Syncers: map[string]*executionsync.Syncer{ledger.ProviderCloudRun: e.syncer}, Log: e.log, Now: e.clock.Now})
}

// fresh is an active row of e.org observed a second ago, far from any sweep's age, whose
// execution exec builds; it returns the row's uuid and its execution's name.
func (e *env) fresh(exec func(string, time.Time) *runpb.Execution) (string, string) {
	e.t.Helper()
	id := e.put(row{observedAt: e.clock.Now().Add(-time.Second), active: true})
	name := e.get(id).ProviderRef[cloudrun.RefKey].(string)
	if exec != nil {
		if err := e.fake.SetExecution(exec(name, e.clock.Now())); err != nil {
			e.t.Fatal(err)
		}
	}
	return id, name
}

func (e *env) observe(data []byte) executionsync.Observation {
	e.t.Helper()
	o, err := e.observer().Observe(context.Background(), data, e.clock.Now(), nil)
	if err != nil {
		e.t.Fatalf("observe: %v", err)
	}
	return o
}

// An execution that ended is settled from its entry at once, whatever its row's age, through one
// query, one GetExecution and one transaction; the settlement names the entry.
func TestAnEndedExecutionsEntrySettlesItsRowAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, name := e.fresh(failed)
	e.spy.Reset()
	e.fake.ResetCalls()
	o := e.observe(logentrytest.CloudRunEnd(name, "entry-1", "Execution failed", e.clock.Now()))
	if len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncSettled || o.Results[0].Settled != ledger.OutcomeFailed {
		t.Fatalf("observation %+v", o)
	}
	r := e.get(id)
	if r.Active || r.Outcome != ledger.OutcomeFailed || r.Settlement == nil {
		t.Fatalf("row %+v", r)
	}
	ev := r.Settlement.Evidence
	if ev[executionsync.EvidencePath] != "event" || ev[executionsync.EvidenceInsertID] != "entry-1" || r.Settlement.Reason != executionsync.ReasonExecutorTerminal ||
		r.Settlement.WorkflowRunUUID != executionsync.EndedRunID(executionsync.Ended{Log: "projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event", InsertID: "entry-1"}) {
		t.Errorf("settlement %+v", r.Settlement)
	}
	if q, calls, commits := len(e.spy.Queries()), e.fake.Calls(cloudrunfake.GetExecution), e.spy.Commits(); q != 1 || calls != 1 || commits != 1 {
		t.Errorf("cost: %d queries, %d GetExecution, %d commits; want 1, 1, 1", q, calls, commits)
	}
}

// The same entry delivered twice, one after the other or both at once, settles its row once.
func TestAnEntryDeliveredTwiceSettlesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	_, name := e.fresh(succeeded)
	_, both := e.fresh(succeeded)
	e.spy.Reset()
	entry := logentrytest.CloudRunEnd(name, "twice", "", e.clock.Now())
	e.observe(entry)
	if again := e.observe(entry); again.Ignored != "no_row" || len(again.Results) != 0 {
		t.Errorf("the second delivery: %+v, want no row", again)
	}
	entry = logentrytest.CloudRunEnd(both, "at-once", "", e.clock.Now())
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := 0
	for range 4 {
		wg.Go(func() {
			o, err := e.observer().Observe(context.Background(), entry, e.clock.Now(), nil)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range o.Results {
				if r.Outcome == executionsync.SyncSettled {
					settled++
				}
			}
		})
	}
	wg.Wait()
	if settled != 1 {
		t.Errorf("%d deliveries at once report the row settled, want 1 (the others are duplicates or find no row)", settled)
	}
	for doc, n := range e.executionWrites("settlement") {
		if n != 1 {
			t.Errorf("%s got %d settlement writes", doc, n)
		}
	}
	if got := len(e.executionWrites("settlement")); got != 2 {
		t.Errorf("%d rows settled, want 2", got)
	}
}

// An entry is a hint: a row whose execution the executor does not show ended is left as it is,
// nothing written (still running; unknown to it, as to a blind target), and the sweep settles it later.
func TestAnEntryForAnExecutionNotEndedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	runningID, runningName := e.fresh(running)
	unknownID, unknownName := e.fresh(nil)
	// Unknown to the executor for longer than any grace: a sweep would settle it lost, an entry never.
	lostID, lostName := e.fresh(nil)
	if _, err := e.fs.Collection(ledger.ExecutionsCollection).Doc(lostID).Update(context.Background(), []firestore.Update{
		{Path: "sync.unknown_since", Value: e.clock.Now().Add(-30 * 24 * time.Hour)}, {Path: "sync.last_verdict", Value: "unknown"}}); err != nil {
		t.Fatal(err)
	}
	e.spy.Reset()
	for _, name := range []string{runningName, unknownName, lostName} {
		o := e.observe(logentrytest.CloudRunEnd(name, "early-"+name[len(name)-8:], "", e.clock.Now()))
		if len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncNotEnded {
			t.Errorf("%s: %+v, want not_ended", name, o)
		}
	}
	if w := e.spy.Writes(); len(w) != 0 {
		t.Errorf("writes %+v, want none", w)
	}
	for _, id := range []string{runningID, unknownID, lostID} {
		if r := e.get(id); !r.Active || r.Settlement != nil {
			t.Errorf("row %s: %+v", id, r)
		}
	}
	// The running execution ends after its early entry: no entry comes again, and the sweep
	// settles the row once it is old enough.
	if err := e.fake.SetExecution(succeeded(runningName, e.clock.Now())); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	if _, s := outputOf(t, e.start(map[string]any{})); s.Settled[ledger.OutcomeSucceeded] != 1 {
		t.Errorf("the sweep settled %v, want the ended execution's row succeeded", s.Settled)
	}
	if r := e.get(runningID); r.Active || r.Outcome != ledger.OutcomeSucceeded || r.Settlement.Evidence[executionsync.EvidencePath] != nil {
		t.Errorf("the row the early entry left: %+v", r)
	}
}

// The guards of every sync hold on the event path: an opted-out organization, one stalesweep
// does not know (another tenant's row naming the execution), a paused workflow, fleet-wide or on
// the organization, are refused in the transaction, nothing written.
func TestTheEventPathIsRefusedWhereASyncWouldBe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		touch func(e *env)
		why   string
	}{
		{"the organization opted out", func(e *env) {
			if err := (ledgertest.Organizations{Client: e.fs}).Put(context.Background(), ledger.Organization{UUID: e.org, SweepsEnabled: false}); err != nil {
				e.t.Fatal(err)
			}
		}, executionsync.RefuseDisabled},
		{"an organization without a document", func(e *env) {
			if _, err := e.fs.Collection(ledger.OrganizationsCollection).Doc(e.org).Delete(context.Background()); err != nil {
				e.t.Fatal(err)
			}
		}, executionsync.RefuseDisabled},
		{"paused on the organization", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, e.org) }, executionsync.RefusePaused},
		{"paused fleet-wide", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, "") }, executionsync.RefusePaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, options{})
			id, name := e.fresh(succeeded)
			tc.touch(e)
			e.spy.Reset()
			o := e.observe(logentrytest.CloudRunEnd(name, "guarded", "", e.clock.Now()))
			if len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncRefused || o.Results[0].Why != tc.why {
				t.Errorf("%+v, want refused %s", o, tc.why)
			}
			if w := e.spy.Writes(); len(w) != 0 {
				t.Errorf("writes %+v", w)
			}
			if !e.get(id).Active {
				t.Error("the row was settled")
			}
		})
	}
}

// A flood of entries naming no row costs one query each, no executor call and no write; garbage
// costs nothing at all. Both are acknowledged.
func TestEntriesThatNameNoRowCostOneReadEach(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.spy.Reset()
	e.fake.ResetCalls()
	const flood = 40
	for i := range flood {
		name := cloudrunfake.ExecutionName("p", "europe-west1", "job", fmt.Sprintf("nobody-%02d", i))
		if o := e.observe(logentrytest.CloudRunEnd(name, fmt.Sprint("flood-", i), "", e.clock.Now())); o.Ignored != "no_row" {
			t.Fatalf("%+v, want no_row", o)
		}
	}
	for _, junk := range []string{"not json", "[]", "{}", `{"insertId":"x","logName":"projects/p/logs/other"}`} {
		if o := e.observe([]byte(junk)); o.Ignored == "" {
			t.Errorf("%q: %+v, want ignored", junk, o)
		}
	}
	if reads, calls, w := e.spy.BilledReads(), e.fake.Calls(cloudrunfake.GetExecution), len(e.spy.Writes()); reads != flood || calls != 0 || w != 0 {
		t.Errorf("%d billed reads, %d GetExecution, %d writes; want %d, 0, 0", reads, calls, w, flood)
	}
}

// A failure of stalesweep's own asks for redelivery, with nothing written, until the entry is
// older than GiveUpAfter: then it is acknowledged and the sweep settles the row.
func TestAnExecutorOutageAsksForRedeliveryBoundedByAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	id, name := e.fresh(succeeded)
	e.fake.FailNext(cloudrunfake.GetExecution, codes.Unavailable, 100)
	entry := logentrytest.CloudRunEnd(name, "outage", "", e.clock.Now())
	e.spy.Reset()
	if _, err := e.observer().Observe(context.Background(), entry, e.clock.Now(), nil); err == nil {
		t.Error("an executor outage was acknowledged")
	}
	if _, err := e.observer().Observe(context.Background(), entry, e.clock.Now().Add(-executionsync.GiveUpAfterDefault-time.Second), nil); err != nil {
		t.Errorf("an entry past GiveUpAfter asked for redelivery: %v", err)
	}
	if w := e.spy.Writes(); len(w) != 0 || !e.get(id).Active {
		t.Errorf("writes %+v", w)
	}
	e.fake.ClearFaults()
	if o := e.observe(entry); len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncSettled {
		t.Errorf("the redelivery: %+v", o)
	}
}

// The metric that says the event path has gone quiet (alerts: event_path_missed) counts the
// row_settled line of a sweep that settles an ended Cloud Run execution, and never the event
// path's own: a healthy event path leaves it at zero.
func TestEventPathMissedCountsTheSweepsSettlementsOfEndedExecutionsOnly(t *testing.T) {
	t.Parallel()
	logs := &lines{}
	e := newEnv(t, options{logs: logs})
	_, name := e.fresh(succeeded)
	e.observe(logentrytest.CloudRunEnd(name, "by-the-event", "", e.clock.Now()))
	e.stale(succeeded)
	if _, s := outputOf(t, e.start(map[string]any{})); s.Settled[ledger.OutcomeSucceeded] != 1 {
		t.Fatalf("the sweep settled %v, want one succeeded", s.Settled)
	}
	var missed *alerts.Metric
	for i := range alerts.Metrics {
		if alerts.Metrics[i].Name == "event_path_missed" {
			missed = &alerts.Metrics[i]
		}
	}
	if missed == nil || alerts.CloudRunSync != string(contract.ExecutionSyncCloudRun) {
		t.Fatalf("no event_path_missed metric over %q", alerts.CloudRunSync)
	}
	paths := map[string]bool{}
	for _, line := range logs.Lines(t) {
		if line[alerts.Key] != string(alerts.RowSettled) {
			continue
		}
		counted, missing := missed.Matches(line)
		paths[fmt.Sprint(line["path"])] = counted
		if len(missing) > 0 {
			t.Errorf("a counted line lacks %v: %v", missing, line)
		}
	}
	if len(paths) != 2 || !paths[executionsync.PathSweep] || paths[executionsync.PathEvent] {
		t.Errorf("counted by path %v, want the sweep's line only", paths)
	}
}
