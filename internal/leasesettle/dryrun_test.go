package leasesettle_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// rules is the dataset of TestEachRuleAndBothKeepCases: a lease for each rule and each way a
// lease is kept.
type rules struct {
	terminated, stopped, missingStale, aliveStale, missingFresh, strangerStale, released string
}

func (e *env) eachRule() rules {
	e.T.Helper()
	var r rules
	r.terminated = e.lease(e.instance("terminated"), time.Second)
	r.stopped = e.lease(e.instance("stopped"), time.Hour)
	r.missingStale = e.lease(uuid.NewString(), 10*time.Minute)
	r.aliveStale = e.lease(e.instance("running"), time.Hour)
	r.missingFresh = e.lease(uuid.NewString(), time.Minute)
	otherGroupInstance := uuid.NewString()
	if err := e.runner.PutInstance(context.Background(), ledger.RunnerInstance{UUID: otherGroupInstance, OrganizationUUID: e.org, RunnerGroupUUID: uuid.NewString(), Status: "running"}); err != nil {
		e.T.Fatal(err)
	}
	r.strangerStale = e.lease(otherGroupInstance, 10*time.Minute)
	r.released = e.lease(e.instance("terminated"), time.Hour)
	if err := e.runner.Release(context.Background(), r.released, e.get(r.released).HolderUUID, e.Clock.Now()); err != nil {
		e.T.Fatal(err)
	}
	return r
}

// dryRun previews a run over the env's group through the engine.
func (e *env) dryRun(trigger workflow.Trigger, override bool) (workflow.Outcome, leasesettle.Output, leasesettle.Stats) {
	e.T.Helper()
	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
	out := sweeptest.Dry(e.T, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw,
		Trigger: trigger, Overrides: workflow.Overrides{Storm: override}, DryRun: true})
	var o leasesettle.Output
	var s leasesettle.Stats
	testenv.Decode(e.T, out.Output, &o)
	testenv.Decode(e.T, out.Stats, &s)
	if s.Preview == nil {
		e.T.Fatalf("a dry run's stats say nothing of what it would do: %+v", out.Stats)
	}
	return out, o, s
}

// verdicts maps each previewed row to its action/rule.
func verdicts(p *explain.Preview) map[string]string {
	m := map[string]string{}
	for _, r := range p.Rows {
		m[r.ID] = r.Action + "/" + r.Rule
	}
	return m
}

// A dry run over one lease for each rule says, lease by lease, what the real run then does,
// and writes nothing.
func TestADryRunReportsWhatTheRunThenAbandonsAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	d := e.eachRule()
	e.Spy.Reset()

	out, o, s := e.dryRun(workflow.TriggerSchedule, false)
	sweeptest.NoWrites(t, e.Spy, "the dry run")
	if out.Status != workflow.StateCompleted || o.Settled != 0 || len(o.Settlements) != 0 || o.Examined != 6 {
		t.Errorf("dry run: %s, output %+v; want completed, 6 examined, nothing settled", out.Status, o)
	}
	want := map[string]string{
		d.terminated: "abandon/" + leasesettle.ReasonHolderTerminal, d.stopped: "abandon/" + leasesettle.ReasonHolderTerminal,
		d.missingStale: "abandon/" + leasesettle.ReasonHolderUnresolvableStale, d.strangerStale: "abandon/" + leasesettle.ReasonHolderUnresolvableStale,
		d.aliveStale: "keep/" + leasesettle.KeepHolderAlive, d.missingFresh: "keep/" + leasesettle.KeepHeartbeatFresh,
	}
	if got := verdicts(s.Preview); !maps.Equal(got, want) {
		t.Errorf("the dry run says %v, want %v", got, want)
	}
	if s.Preview.StormGuardWouldStop || s.Preview.ReadWith != explain.ReadOnlyTransaction {
		t.Errorf("preview %+v", s.Preview)
	}
	// Its output says what its preview says: it would abandon four.
	if s.Preview.Counts["abandon"] != 4 || o.Outcome != leasesettle.OutcomeWouldSettle || !strings.HasPrefix(o.Reason, "dry run: would abandon 4 of 6 ") {
		t.Errorf("output outcome %q, reason %q; preview %v; want would_settle, \"dry run: would abandon 4 of 6 …\"", o.Outcome, o.Reason, s.Preview.Counts)
	}
	for id := range want {
		if l := e.get(id); l.Status != ledger.LeaseActive || l.Settlement != nil {
			t.Errorf("the dry run changed lease %s: %+v", id, l)
		}
	}

	_, real := e.run(map[string]any{})
	got := map[string]string{}
	for _, st := range real.Settlements {
		got[st.LeaseUUID] = "abandon/" + st.Reason
	}
	for id, v := range want {
		if v[:len("abandon/")] != "abandon/" {
			continue
		}
		if got[id] != v {
			t.Errorf("lease %s: the real run did %q, the dry run said %q", id, got[id], v)
		}
	}
	if len(got) != 4 {
		t.Errorf("the real run abandoned %v, the dry run said four", got)
	}
}

// A dry run the storm guard would stop fails as the real run would, says it would still abandon
// the leases of terminated holders and hold back the ones on age alone, and writes nothing.
func TestADryRunTheStormGuardWouldStopSaysSoAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	unresolvable, terminal := e.stormGroup()
	e.Spy.Reset()
	out, _, s := e.dryRun(workflow.TriggerLocal, false)
	if out.Status != workflow.StateFailed || !errors.Is(out.Err, storm.ErrTripped) || !s.Preview.StormGuardWouldStop {
		t.Errorf("dry run: %s %v, preview %+v; want failed by the storm guard, as the real run", out.Status, out.Err, s.Preview)
	}
	v := verdicts(s.Preview)
	for _, id := range terminal {
		if v[id] != "abandon/"+leasesettle.ReasonHolderTerminal {
			t.Errorf("lease %s of a terminated holder: %q, want abandoned despite the guard", id, v[id])
		}
	}
	for _, id := range unresolvable {
		if v[id] != "keep/"+storm.Reason {
			t.Errorf("lease %s on age alone: %q, want held back by the guard", id, v[id])
		}
	}
	sweeptest.NoWrites(t, e.Spy, "the dry run")
}

// Explain's verdict on one lease for each rule, and on one no scan can see, is what the next
// run over the group does with it; after it, explain shows the settlement recorded.
func TestExplainSaysWhatTheNextRunDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	d := e.eachRule()
	invisible := uuid.NewString()
	if _, err := e.FS.Collection(ledger.WorkspaceLeasesCollection).Doc(invisible).Set(context.Background(), map[string]any{
		"organization_uuid": e.org, "runner_group_uuid": e.group, "workspace_id": "ws", "holder_runner_instance_uuid": uuid.NewString(),
		"status": ledger.LeaseActive, "heartbeat_at": int64(12)}); err != nil {
		t.Fatal(err)
	}
	ids := []string{d.terminated, d.stopped, d.missingStale, d.aliveStale, d.missingFresh, d.strangerStale, d.released, invisible}
	said := sweeptest.ExplainEach(t, ids, func(id string) (explain.Explanation, error) {
		return e.wf.Explain(context.Background(), e.store, id, explain.Options{})
	})
	_, o := e.run(map[string]any{})
	settled := map[string]string{}
	for _, s := range o.Settlements {
		settled[s.LeaseUUID] = s.Reason
	}
	for _, id := range ids {
		x := said[id]
		if want := settled[id]; (x.Verdict == "abandon") != (want != "") || (want != "" && x.Rule != want) {
			t.Errorf("lease %s: explain said %s (%s), the run settled it as %q", id, x.Verdict, x.Rule, want)
		}
	}
	for id, want := range map[string]string{
		d.aliveStale: "keep/" + leasesettle.KeepHolderAlive, d.missingFresh: "keep/" + leasesettle.KeepHeartbeatFresh,
		d.released: "keep/" + leasesettle.KeepNotActive, invisible: "skip/invisible",
	} {
		if x := said[id]; x.Verdict+"/"+x.Rule != want {
			t.Errorf("lease %s: explain said %s/%s, want %s", id, x.Verdict, x.Rule, want)
		}
	}
	if said[d.released].Visible || said[invisible].Visible || !said[d.terminated].Visible || !said[invisible].Checks[0].OK {
		t.Error("visibility: a released lease and one without a timestamp heartbeat are not scanned; an active one is")
	}
	x, err := e.wf.Explain(context.Background(), e.store, d.terminated, explain.Options{})
	if err != nil || x.Verdict != "keep" || x.Rule != leasesettle.KeepNotActive || x.Last["settlement"] == nil {
		t.Errorf("after the run: %+v %v", x, err)
	}

	// An organization that opted out: no run writes its leases, and explain says so.
	e.optOut()
	x, err = e.wf.Explain(context.Background(), e.store, d.missingFresh, explain.Options{})
	if err != nil || x.Verdict != "refuse" || x.Rule != leasesettle.RefuseDisabled || x.Visible {
		t.Errorf("an opted-out organization's lease: %+v %v", x, err)
	}
	if _, err := e.wf.Explain(context.Background(), e.store, uuid.NewString(), explain.Options{}); !errors.Is(err, ledger.ErrNoRow) {
		t.Errorf("a missing lease: %v, want ErrNoRow", err)
	}
}
