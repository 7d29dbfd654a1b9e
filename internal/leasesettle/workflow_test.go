package leasesettle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/seeds"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	now := epoch
	timeout := 5 * time.Minute
	lease := func(hbAgo time.Duration, st string) ledger.WorkspaceLease {
		return ledger.WorkspaceLease{Status: st, HeartbeatAt: now.Add(-hbAgo)}
	}
	for _, c := range []struct {
		name    string
		lease   ledger.WorkspaceLease
		holder  ledger.HolderView
		abandon bool
		why     string
	}{
		{"terminal holder, fresh heartbeat", lease(time.Second, "active"), ledger.HolderView{Resolved: true, Status: "terminated"}, true, leasesettle.ReasonHolderTerminal},
		{"stopped holder", lease(time.Hour, "active"), ledger.HolderView{Resolved: true, Status: "stopped"}, true, leasesettle.ReasonHolderTerminal},
		{"failed holder", lease(time.Second, "active"), ledger.HolderView{Resolved: true, Status: "failed"}, true, leasesettle.ReasonHolderTerminal},
		{"alive holder, stale heartbeat", lease(time.Hour, "active"), ledger.HolderView{Resolved: true, Status: "running"}, false, leasesettle.KeepHolderAlive},
		{"draining holder", lease(time.Hour, "active"), ledger.HolderView{Resolved: true, Status: "draining"}, false, leasesettle.KeepHolderAlive},
		{"starting holder", lease(time.Hour, "active"), ledger.HolderView{Resolved: true, Status: "starting"}, false, leasesettle.KeepHolderAlive},
		{"unresolvable, stale", lease(6*time.Minute, "active"), ledger.HolderView{}, true, leasesettle.ReasonHolderUnresolvableStale},
		{"unresolvable, exactly the timeout", lease(5*time.Minute, "active"), ledger.HolderView{}, false, leasesettle.KeepHeartbeatFresh},
		{"unresolvable, fresh", lease(time.Minute, "active"), ledger.HolderView{}, false, leasesettle.KeepHeartbeatFresh},
		{"released lease", lease(time.Hour, "released"), ledger.HolderView{Resolved: true, Status: "terminated"}, false, leasesettle.KeepNotActive},
		{"abandoned lease", lease(time.Hour, "abandoned"), ledger.HolderView{}, false, leasesettle.KeepNotActive},
	} {
		abandon, why := leasesettle.Decide(c.lease, c.holder, now, timeout)
		if abandon != c.abandon || why != c.why {
			t.Errorf("%s: (%t, %s), want (%t, %s)", c.name, abandon, why, c.abandon, c.why)
		}
	}
	other := ledger.WorkspaceLease{OrganizationUUID: "o", RunnerGroupUUID: "g"}
	if v := ledger.ResolveHolder(other, ledger.RunnerInstance{OrganizationUUID: "o", RunnerGroupUUID: "g2", Status: "running"}, true); v.Resolved {
		t.Error("an instance of another group resolves as the holder")
	}
	if v := ledger.ResolveHolder(other, ledger.RunnerInstance{OrganizationUUID: "o", RunnerGroupUUID: "g", Status: "running"}, true); !v.Resolved || v.Status != "running" {
		t.Errorf("the holder does not resolve: %+v", v)
	}
}

type env struct {
	sweeptest.Env
	store  *ledger.LeaseStore
	runner ledgertest.Leases
	wf     *leasesettle.Workflow
	org    string
	group  string
}

func newEnv(t *testing.T, cfg leasesettle.Config, wrap func(leasesettle.Store) leasesettle.Store) *env {
	e := &env{Env: sweeptest.NewEnv(t, epoch), org: uuid.NewString(), group: uuid.NewString()}
	e.store = ledger.NewLeaseStore(e.FS, ledger.TxConfig{})
	e.runner = ledgertest.Leases{Client: e.FS, Now: e.Clock.Now}
	e.wf = leasesettle.New(sweeptest.Wrap[leasesettle.Store](e.store, wrap), cfg, ledgertest.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	if err := e.runner.PutGroup(context.Background(), ledger.RunnerGroup{UUID: e.group, OrganizationUUID: e.org, HeartbeatTimeoutSeconds: 300}); err != nil {
		t.Fatal(err)
	}
	testenv.Enable(t, e.FS, e.org)
	return e
}

// instance registers an instance of the env's group with a status.
func (e *env) instance(status string) string {
	e.T.Helper()
	id := uuid.NewString()
	if err := e.runner.PutInstance(context.Background(), ledger.RunnerInstance{UUID: id, OrganizationUUID: e.org, RunnerGroupUUID: e.group, Status: status}); err != nil {
		e.T.Fatal(err)
	}
	return id
}

// lease has holder acquire a workspace lease whose last heartbeat Firestore took `ago`.
func (e *env) lease(holder string, ago time.Duration) string {
	e.T.Helper()
	return e.leaseIn(e.org, e.group, holder, ago)
}

func (e *env) leaseIn(org, group, holder string, ago time.Duration) string {
	e.T.Helper()
	id := uuid.NewString()
	then := e.Clock.Now().Add(-ago)
	runner := ledgertest.Leases{Client: e.FS, Now: testenv.Fixed(then)}
	if err := runner.Acquire(context.Background(), ledger.WorkspaceLease{UUID: id, OrganizationUUID: org, RunnerGroupUUID: group,
		WorkspaceID: "ws-" + id[:6], HolderUUID: holder}, then); err != nil {
		e.T.Fatal(err)
	}
	return id
}

func (e *env) get(id string) ledger.WorkspaceLease {
	e.T.Helper()
	l, err := ledgertest.Value(e.store.Row(context.Background(), id))
	if err != nil {
		e.T.Fatal(err)
	}
	return l
}

func (e *env) run(input map[string]any) (workflow.Outcome, leasesettle.Output) {
	e.T.Helper()
	input["organization_uuid"], input["runner_group_uuid"] = e.org, e.group
	raw, _ := json.Marshal(input)
	out := sweeptest.Completed(e.T, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerSchedule}, "run")
	var o leasesettle.Output
	testenv.Decode(e.T, out.Output, &o)
	return out, o
}

func TestEachRuleAndBothKeepCases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	d := e.eachRule()
	terminated, stopped, missingStale, aliveStale, missingFresh, strangerStale, released :=
		d.terminated, d.stopped, d.missingStale, d.aliveStale, d.missingFresh, d.strangerStale, d.released
	e.Spy.Reset()

	out, o := e.run(map[string]any{})
	want := map[string]string{
		terminated: leasesettle.ReasonHolderTerminal, stopped: leasesettle.ReasonHolderTerminal,
		missingStale: leasesettle.ReasonHolderUnresolvableStale, strangerStale: leasesettle.ReasonHolderUnresolvableStale,
	}
	if o.Examined != 6 || o.Settled != 4 || len(o.Settlements) != 4 || o.HeartbeatTimeoutSeconds != 300 || o.MaxSettlements != 50 || o.Outcome != "settled" {
		t.Errorf("output = %+v", o)
	}
	for _, s := range o.Settlements {
		if want[s.LeaseUUID] != s.Reason || s.WorkspaceID == "" || s.HolderUUID == "" {
			t.Errorf("settlement %+v, want reason %s", s, want[s.LeaseUUID])
		}
		l := e.get(s.LeaseUUID)
		if l.Status != ledger.LeaseAbandoned || l.Settlement == nil || l.Settlement.Reason != s.Reason || l.Settlement.WorkflowRunUUID != out.RunUUID {
			t.Errorf("lease %s = %+v", s.LeaseUUID, l)
		}
		if s.LeaseUUID == stopped && s.HeartbeatAgeSeconds != 3600 {
			t.Errorf("heartbeat age = %d, want 3600", s.HeartbeatAgeSeconds)
		}
	}
	for _, id := range []string{aliveStale, missingFresh} {
		if l := e.get(id); l.Status != ledger.LeaseActive || l.Settlement != nil {
			t.Errorf("kept lease %s changed: %+v", id, l)
		}
	}
	if l := e.get(released); l.Status != ledger.LeaseReleased || l.Settlement != nil {
		t.Errorf("a released lease was touched: %+v", l)
	}
	for _, f := range []string{"workflow_run_uuid", "status", "initiated_at", "completed_at", "organization_uuid", "runner_group_uuid", "outcome",
		"reason", "examined", "settled", "settlements", "heartbeat_timeout_seconds", "max_settlements"} {
		if _, ok := out.Output[f]; !ok {
			t.Errorf("output lacks %s", f)
		}
	}
	seed := seeds.OutputFields(t, "004_649e0daa9ae6c890.txt")
	for k := range out.Output {
		if !seed[k] {
			t.Errorf("output field %s is not in seed 004", k)
		}
	}
	// Abandonment only: nothing deleted, no holder touched.
	for _, w := range e.Spy.Writes() {
		if w.Delete || strings.Contains(w.Document, "/"+ledger.RunnerInstancesCollection+"/") {
			t.Errorf("the settle wrote %+v", w)
		}
	}
}

func TestOtherGroupsAndOrganizationsAreUntouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	mine := e.lease(e.instance("terminated"), time.Hour)
	otherGroup, otherOrg := uuid.NewString(), uuid.NewString()
	theirs := []string{
		e.leaseIn(e.org, otherGroup, e.instance("terminated"), time.Hour),
		e.leaseIn(otherOrg, e.group, e.instance("terminated"), time.Hour),
		e.leaseIn(otherOrg, otherGroup, uuid.NewString(), time.Hour),
	}
	e.Spy.Reset()
	_, o := e.run(map[string]any{})
	if o.Settled != 1 || o.Settlements[0].LeaseUUID != mine {
		t.Errorf("output = %+v", o)
	}
	read := map[string]bool{}
	for _, d := range e.Spy.Reads() {
		read[fsspy.DocID(d)] = true
	}
	for _, id := range theirs {
		if l := e.get(id); l.Status != ledger.LeaseActive || l.Settlement != nil {
			t.Errorf("another group's lease %s changed: %+v", id, l)
		}
		if read[id] {
			t.Errorf("another group's lease %s was read", id)
		}
	}
}

func TestKeptLeasesInFrontDoNotStarveAbandonableOnesBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{PageSize: 25}, nil)
	alive := e.instance("running")
	for i := range 60 { // older heartbeats: first in the scan, all to keep
		e.lease(alive, 2*time.Hour-time.Duration(i)*time.Second)
	}
	var abandonable []string
	for range 10 {
		abandonable = append(abandonable, e.lease(e.instance("terminated"), time.Hour))
	}
	settled := map[string]bool{}
	for run := 1; run <= 2 && len(settled) < 10; run++ {
		_, o := e.run(map[string]any{"max_settlements": 50})
		for _, s := range o.Settlements {
			settled[s.LeaseUUID] = true
		}
		t.Logf("run %d: examined %d, settled %d", run, o.Examined, o.Settled)
	}
	for _, id := range abandonable {
		if !settled[id] {
			t.Errorf("abandonable lease %s not settled within two runs", id)
		}
	}
}

func TestMaxSettlementsBoundsARun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	for range 7 {
		e.lease(e.instance("failed"), time.Hour)
	}
	_, o := e.run(map[string]any{"max_settlements": 3})
	if o.Settled != 3 || o.MaxSettlements != 3 {
		t.Errorf("first run: %+v", o)
	}
	_, o = e.run(map[string]any{"max_settlements": 3})
	_, o2 := e.run(map[string]any{"max_settlements": 3})
	if o.Settled != 3 || o2.Settled != 1 {
		t.Errorf("later runs settled %d and %d, want 3 and 1", o.Settled, o2.Settled)
	}
	_, o = e.run(map[string]any{})
	if o.Settled != 0 || o.Outcome != "nothing_to_settle" {
		t.Errorf("a run after everything is settled: %+v", o)
	}
}

// reviver brings a lease's holder back to life after the scan, before the transaction.
type reviver struct {
	leasesettle.Store
	lease  string
	revive func()
}

func (r *reviver) AbandonLease(ctx context.Context, id string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	if id == r.lease {
		r.revive()
	}
	return r.Store.AbandonLease(ctx, id, reads, decide)
}

func TestAHolderThatComesBackToLifeKeepsItsLease(t *testing.T) {
	t.Parallel()
	var rv *reviver
	e := newEnv(t, leasesettle.Config{}, func(s leasesettle.Store) leasesettle.Store { rv = &reviver{Store: s}; return rv })
	holder := e.instance("terminated")
	rv.lease = e.lease(holder, time.Hour)
	rv.revive = func() {
		if err := e.runner.SetInstanceStatus(context.Background(), holder, ledger.InstanceRunning); err != nil {
			t.Error(err)
		}
	}
	other := e.lease(e.instance("terminated"), time.Hour)
	_, o := e.run(map[string]any{})
	if o.Settled != 1 || o.Settlements[0].LeaseUUID != other {
		t.Errorf("output = %+v", o)
	}
	if l := e.get(rv.lease); l.Status != ledger.LeaseActive {
		t.Errorf("the revived holder's lease was abandoned: %+v", l)
	}
}

func TestFourConcurrentRunsAbandonEachLeaseOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	var ids []string
	for i := range 40 {
		holder := uuid.NewString() // unresolvable
		if i%2 == 0 {
			holder = e.instance("terminated")
		}
		ids = append(ids, e.lease(holder, time.Hour))
	}
	e.Spy.Reset()
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := workflow.Run{UUID: fmt.Sprintf("run-%d", i), Logger: logging.Discard(), Overrides: workflow.Overrides{Storm: true}} // past the storm guard
			o, _, err := e.wf.RunOnce(context.Background(), run, leasesettle.Input{OrganizationUUID: e.org, RunnerGroupUUID: e.group, MaxSettlements: 50})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += o.Settled
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 40 {
		t.Errorf("settled totals add to %d, want 40", total)
	}
	// A commit that failed at the client with a deadline or a lost answer may still have been
	// applied, and the run that read its settlement back reports it settled: such a lease was
	// written by a commit the spy saw fail, never by none.
	writes := e.Spy.WritesTouching("settlement")
	failed := e.Spy.FailedWritesTouching("settlement")
	lost := 0
	for _, id := range ids {
		if e.get(id).Status != ledger.LeaseAbandoned {
			t.Errorf("lease %s not abandoned", id)
		}
	}
	for doc := range failed {
		if writes[doc] == 0 {
			lost++
		}
	}
	for doc, n := range writes {
		if n != 1 {
			t.Errorf("%s written %d times", doc, n)
		}
	}
	if len(writes)+lost != 40 {
		t.Errorf("%d leases written by commits seen committed and %d by commits that failed at the client, want 40", len(writes), lost)
	}
}

func TestBadInputAndForeignGroupsAreRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	noTimeout := uuid.NewString()
	_ = e.runner.PutGroup(context.Background(), ledger.RunnerGroup{UUID: noTimeout, OrganizationUUID: e.org})
	e.Spy.Reset()
	for input, field := range map[string]string{
		`{"runner_group_uuid": "` + e.group + `"}`:                                                               "organization_uuid",
		`{"organization_uuid": "` + e.org + `"}`:                                                                 "runner_group_uuid",
		`{"organization_uuid": "x", "runner_group_uuid": "` + e.group + `"}`:                                     "organization_uuid",
		`{"organization_uuid": "` + e.org + `", "runner_group_uuid": "` + e.group + `", "max_settlements": 0}`:   "max_settlements",
		`{"organization_uuid": "` + e.org + `", "runner_group_uuid": "` + e.group + `", "max_settlements": 501}`: "max_settlements",
		`{"organization_uuid": "` + e.org + `", "runner_group_uuid": "` + e.group + `", "dry_run": true}`:        "dry_run",
		`{"organization_uuid": "` + e.org + `", "runner_group_uuid": "` + uuid.NewString() + `"}`:                "runner_group_uuid",
		`{"organization_uuid": "` + uuid.NewString() + `", "runner_group_uuid": "` + e.group + `"}`:              "runner_group_uuid",
		`{"organization_uuid": "` + e.org + `", "runner_group_uuid": "` + noTimeout + `"}`:                       "runner_group_uuid",
	} {
		_, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: []byte(input), Trigger: workflow.TriggerManual})
		if contract.CodeOf(err) != contract.CodeValidationFailed || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want validation_failed naming %s", input, err, field)
		}
	}
	if n := e.Spy.Commits(); n != 0 {
		t.Errorf("refused inputs committed %d times", n)
	}
}

func TestTheLeaseLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	ctx := context.Background()
	holder := e.instance("running")
	id := e.lease(holder, 0)
	e.Clock.Advance(time.Minute)
	if err := e.runner.Heartbeat(ctx, id, holder); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Heartbeat(ctx, id, "someone-else"); err == nil {
		t.Error("another instance heartbeated the lease")
	}
	if err := e.runner.Release(ctx, id, holder, e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if l := e.get(id); l.Status != ledger.LeaseReleased || !l.ReleasedAt.Equal(e.Clock.Now()) || !l.HeartbeatAt.Equal(e.Clock.Now()) {
		t.Errorf("lease = %+v", l)
	}
	if err := e.runner.Heartbeat(ctx, id, holder); err == nil {
		t.Error("a released lease took a heartbeat")
	}
}

// Who may write a lease is checked in its own transaction, on what it read there: a lease that
// moved to another organization or runner group after the scan, or whose organization opted out
// meanwhile, is left as it is and counted as refused; told to (--include-disabled), the
// operator's run settles an organization that opted out.
func TestOnlyARunOfTheLeasesOwnOrganizationAndGroupMayAbandonIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		between         func(e *env, lease string) // after the scan, before the transaction
		includeDisabled bool
		refused         string // "" abandons
	}{
		{"moved to another organization", func(e *env, lease string) { e.move(lease, "organization_uuid", uuid.NewString()) }, false, leasesettle.RefuseOtherOrganization},
		{"moved to another group", func(e *env, lease string) { e.move(lease, "runner_group_uuid", uuid.NewString()) }, false, leasesettle.RefuseOtherGroup},
		{"its organization opted out", func(e *env, _ string) { e.optOut() }, false, leasesettle.RefuseDisabled},
		{"its organization opted out, and the operator includes it", func(e *env, _ string) { e.optOut() }, true, ""},
		{"nothing changed", func(*env, string) {}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, rv := revived(t, tt.between)
			run := workflow.Run{UUID: "run-" + uuid.NewString(), Logger: logging.Discard(), Overrides: workflow.Overrides{OptOut: tt.includeDisabled}}
			o, stats, err := e.wf.RunOnce(context.Background(), run, leasesettle.Input{OrganizationUUID: e.org, RunnerGroupUUID: e.group, MaxSettlements: 50})
			if err != nil {
				t.Fatal(err)
			}
			l := e.get(rv.lease)
			switch {
			case tt.refused == "" && (o.Settled != 1 || l.Status != ledger.LeaseAbandoned):
				t.Errorf("settled %d, lease %s; want it abandoned", o.Settled, l.Status)
			case tt.refused != "" && (o.Settled != 0 || l.Status != ledger.LeaseActive || stats.Refused[tt.refused] != 1):
				t.Errorf("settled %d, lease %s, refused %v; want it left active and refused %s", o.Settled, l.Status, stats.Refused, tt.refused)
			}
		})
	}
}

// move rewrites one field of a lease, as a foreign writer might.
func (e *env) move(lease, field, value string) {
	e.T.Helper()
	if _, err := e.FS.Collection(ledger.WorkspaceLeasesCollection).Doc(lease).Update(context.Background(), []firestore.Update{{Path: field, Value: value}}); err != nil {
		e.T.Fatal(err)
	}
}

// optOut sets the env's organization's sweeps_enabled to false.
func (e *env) optOut() {
	e.T.Helper()
	if err := (ledgertest.Organizations{Client: e.FS}).Put(context.Background(), ledger.Organization{UUID: e.org, SweepsEnabled: false}); err != nil {
		e.T.Fatal(err)
	}
}

// Active leases a writer left without heartbeat_at, or with a string or a number there, are
// counted and sampled by every run, and never abandoned — even when their holder is terminal.
func TestLeasesNoScanCanSeeAreCountedAndLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	dead := e.instance("terminated")
	settled := e.lease(dead, time.Hour)
	var bad []string
	for _, v := range testenv.Unstamped {
		id := uuid.NewString()
		testenv.PutStamped(t, e.FS, ledger.WorkspaceLeasesCollection+"/"+id, map[string]any{
			"organization_uuid": e.org, "runner_group_uuid": e.group, "workspace_id": "ws", "holder_runner_instance_uuid": dead,
			"status": ledger.LeaseActive, "acquired_at": e.Clock.Now().Add(-time.Hour),
		}, "heartbeat_at", v)
		bad = append(bad, id)
	}
	out, o := e.run(map[string]any{})
	var s leasesettle.Stats
	testenv.Decode(t, out.Stats, &s)
	if s.Invisible == nil || s.Invisible.Count != 3 || !slices.Equal(slices.Sorted(slices.Values(s.Invisible.Sample)), slices.Sorted(slices.Values(bad))) {
		t.Errorf("stats.invisible = %+v, want the 3 leases %v", s.Invisible, bad)
	}
	if o.Settled != 1 || e.get(settled).Status != ledger.LeaseAbandoned {
		t.Errorf("output = %+v, want the visible lease abandoned", o)
	}
	for _, id := range bad {
		testenv.Unchanged(t, e.FS, "invisible lease", ledger.WorkspaceLeasesCollection+"/"+id)
	}
}

// revived is an env with one stale lease of a terminated holder, and between run on it after the
// scan and before its transaction.
func revived(t *testing.T, between func(e *env, lease string)) (*env, *reviver) {
	t.Helper()
	var rv *reviver
	e := newEnv(t, leasesettle.Config{}, func(s leasesettle.Store) leasesettle.Store { rv = &reviver{Store: s}; return rv })
	rv.lease = e.lease(e.instance("terminated"), time.Hour)
	rv.revive = func() { between(e, rv.lease) }
	return e, rv
}

// The transaction writes only the lease the decision was made on: one whose holder or heartbeat
// moved between the scan and the transaction — even to something that would be abandoned too —
// is left for the next run, which decides on what it reads then.
func TestALeaseWhoseHolderOrHeartbeatMovedIsLeftForTheNextRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		move func(e *env, lease string)
	}{
		{"taken over by another terminated holder", func(e *env, lease string) {
			e.move(lease, "holder_runner_instance_uuid", e.instance("terminated"))
		}},
		{"its heartbeat moved, still stale", func(e *env, lease string) {
			if _, err := e.FS.Collection(ledger.WorkspaceLeasesCollection).Doc(lease).Update(context.Background(),
				[]firestore.Update{{Path: "heartbeat_at", Value: e.Clock.Now().Add(-30 * time.Minute)}}); err != nil {
				e.T.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, rv := revived(t, tt.move)
			out, o := e.run(map[string]any{})
			var s leasesettle.Stats
			testenv.Decode(t, out.Stats, &s)
			if o.Settled != 0 || s.Raced != 1 || e.get(rv.lease).Status != ledger.LeaseActive {
				t.Fatalf("settled %d, raced %d, lease %s; want it left for the next run", o.Settled, s.Raced, e.get(rv.lease).Status)
			}
			rv.revive = func() {}
			if _, o := e.run(map[string]any{}); o.Settled != 1 || e.get(rv.lease).Status != ledger.LeaseAbandoned {
				t.Errorf("the next run: settled %d; want the lease abandoned on what it read", o.Settled)
			}
		})
	}
}

// A lease a foreign writer got wrong (its holder a number), stalest of all and on a page
// boundary, among abandonable ones: the run names it, skips it, and settles the rest of the group.
func TestAMalformedLeaseIsSkippedAndTheRestOfTheGroupIsSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{PageSize: 2}, nil)
	dead := e.instance("terminated")
	malformed := e.lease(dead, 3*time.Hour)
	if _, err := e.FS.Collection(ledger.WorkspaceLeasesCollection).Doc(malformed).Update(context.Background(), []firestore.Update{{Path: "holder_runner_instance_uuid", Value: 42}}); err != nil {
		t.Fatal(err)
	}
	good := []string{e.lease(dead, 2*time.Hour), e.lease(dead, time.Hour), e.lease(dead, 30*time.Minute)}
	out, o := e.run(map[string]any{})
	var s leasesettle.Stats
	testenv.Decode(t, out.Stats, &s)
	if s.Malformed == nil || s.Malformed.Count != 1 || !slices.Equal(s.Malformed.Sample, []string{ledger.WorkspaceLeasesCollection + "/" + malformed}) {
		t.Errorf("stats.malformed = %+v, want the malformed lease %s", s.Malformed, malformed)
	}
	if o.Settled != 3 {
		t.Errorf("output = %+v, want the three good leases abandoned", o)
	}
	for _, id := range good {
		if e.get(id).Status != ledger.LeaseAbandoned {
			t.Errorf("lease %s was not abandoned", id)
		}
	}
	snap, err := e.FS.Collection(ledger.WorkspaceLeasesCollection).Doc(malformed).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := snap.DataAt("status"); st != ledger.LeaseActive {
		t.Errorf("the malformed lease was written: %v", snap.Data())
	}
}
