package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// rosterEnv is a fleet behind a spy, dispatched a few organizations per invocation with
// continuations and the roster, at a time the test moves.
type rosterEnv struct {
	dispatchEnv
	spy     *fsspy.Spy
	roster  *rosterstore.Store
	now     time.Time
	handled int // continuations already dispatched
}

func newRosterEnv(t *testing.T, enabled, disabled int) *rosterEnv {
	t.Helper()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	e := &rosterEnv{spy: spy, roster: rosterstore.New(fs, ledger.Retention{}, nil), now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	e.fs, e.orgs, e.ps = fs, orgadmin.New(fs), newPubSub(t, pipeline.SweepsDefault, ticksTopic)
	for i := range enabled + disabled {
		e.put(t, fmt.Sprintf("org-%03d", i), i < enabled)
	}
	return e
}

func (e *rosterEnv) put(t *testing.T, id string, enabled bool) {
	t.Helper()
	if err := (ledgertest.Organizations{Client: e.fs}).Put(context.Background(), ledger.Organization{UUID: id, SweepsEnabled: enabled}); err != nil {
		t.Fatal(err)
	}
}

// tick runs one tick to its end, feeding each continuation back to Dispatch, and returns each
// invocation's report.
func (e *rosterEnv) tick(t *testing.T, id string) []pipeline.Report {
	t.Helper()
	d := pipeline.NewDispatcher(pipeline.DispatcherOptions{
		Orgs: e.orgs, Publisher: e.ps.pub, SweepsTopic: pipeline.SweepsDefault, Workflows: seeded(), Log: logging.Discard(),
		Config:     pipeline.DispatchConfig{PageSize: 4, ShardScopes: 8},
		TicksTopic: ticksTopic,
		Probe:      ledgertest.LocalClock(func() time.Time { return e.now }),
		Roster:     e.roster, RosterMaxAge: 10 * time.Minute,
	})
	next := tick
	next.TickID = id
	var reps []pipeline.Report
	for {
		rep, err := d.Dispatch(context.Background(), next)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
		conts := e.ps.continuations(t)
		if len(conts) == e.handled {
			return reps
		}
		if len(reps) > 20 {
			t.Fatal("the continuations do not end")
		}
		next = conts[e.handled]
		e.handled++
	}
}

// dispatched lists the organizations a tick published a sweep for, in order.
func (e *rosterEnv) dispatched(id string, orgs ...string) []string {
	runs := e.ps.runsPublished()
	var out []string
	for _, org := range orgs {
		if runs[pipeline.RunUUID(id, tick.WorkflowType, org)] > 0 {
			out = append(out, org)
		}
	}
	return out
}

// organizationReads counts the organizations documents read since the spy was reset.
func (e *rosterEnv) organizationReads() int {
	n := 0
	for _, d := range e.spy.Reads() {
		if strings.Contains(d, "/"+ledger.OrganizationsCollection+"/") {
			n++
		}
	}
	return n
}

func modes(reps []pipeline.Report) string {
	var out []string
	for _, r := range reps {
		out = append(out, r.Roster)
	}
	return strings.Join(out, ",")
}

// The first tick lists the organizations and writes them as the roster, across its
// continuations; the next ticks read the roster — no organizations document — and reach the
// same organizations; once the roster is older than its maximum age, a tick lists and rebuilds
// it. Until then an organization that enabled sweeps waits, and one that opted out is still
// dispatched (its sweep refuses it).
func TestTicksReadTheRosterAndRebuildItWhenItIsOld(t *testing.T) {
	t.Parallel()
	e := newRosterEnv(t, 23, 3)
	enabled := orgIDs(23)
	all := append(orgIDs(26), "org-new")

	reps := e.tick(t, "tick-1")
	if got := modes(reps); got != "build,build,build" {
		t.Errorf("the first tick's invocations took their organizations by %s, want build ×3", got)
	}
	if !reps[len(reps)-1].RosterFinished {
		t.Error("the last invocation of the building tick did not finish the roster")
	}
	for _, m := range e.ps.srv.Messages() {
		if m.Attributes[message.AttrDispatchAfter] != "" && m.Attributes[message.AttrRoster] != message.RosterBuild {
			t.Errorf("a continuation of the building tick says roster=%q", m.Attributes[message.AttrRoster])
		}
	}
	if got := e.dispatched("tick-1", all...); strings.Join(got, ",") != strings.Join(enabled, ",") {
		t.Errorf("tick-1 dispatched %v, want the 23 enabled", got)
	}

	e.now = e.now.Add(time.Minute)
	e.spy.Reset()
	reps = e.tick(t, "tick-2")
	if got := modes(reps); got != "read,read,read" {
		t.Errorf("the second tick's invocations took their organizations by %s, want read ×3", got)
	}
	if n := e.organizationReads(); n != 0 {
		t.Errorf("a tick reading the roster read %d organizations documents, want none", n)
	}
	if got := e.dispatched("tick-2", all...); strings.Join(got, ",") != strings.Join(enabled, ",") {
		t.Errorf("tick-2 dispatched %v, want the 23 enabled", got)
	}

	e.put(t, "org-new", true)
	e.put(t, enabled[5], false)
	e.now = e.now.Add(8 * time.Minute) // 9 minutes after the roster was built
	e.tick(t, "tick-3")
	if got := e.dispatched("tick-3", "org-new", enabled[5]); len(got) != 1 || got[0] != enabled[5] {
		t.Errorf("within the roster's age, tick-3 dispatched %v of the new and the opted-out organization; want the opted-out one alone", got)
	}

	e.now = e.now.Add(2 * time.Minute) // 11 minutes: older than its maximum age
	reps = e.tick(t, "tick-4")
	if got := modes(reps); !strings.HasPrefix(got, "build") || !reps[len(reps)-1].RosterFinished {
		t.Errorf("tick-4 took its organizations by %s (finished %t), want a rebuild", got, reps[len(reps)-1].RosterFinished)
	}
	want := append(append([]string{}, enabled[:5]...), enabled[6:]...)
	want = append(want, "org-new")
	if got := e.dispatched("tick-4", all...); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after the rebuild, tick-4 dispatched %v, want %v", got, want)
	}
	cur, _, err := e.roster.Current(context.Background())
	if err != nil || cur.Version != "tick-4" || cur.Last != "org-new" {
		t.Errorf("the roster in use is %+v, %v; want tick-4's, ending at org-new", cur, err)
	}
}

// orgIDs are the ids of a roster env's first n organizations, in id order.
func orgIDs(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("org-%03d", i))
	}
	return out
}

// A roster whose shards are gone (replaced while a tick read it) leaves the tick to list: every
// enabled organization is still dispatched.
func TestATickWhoseRosterIsGoneLists(t *testing.T) {
	t.Parallel()
	e := newRosterEnv(t, 10, 2)
	e.tick(t, "tick-1")
	shards, err := e.fs.Collection(ledger.RosterCollection).Where("shard_of", "==", "tick-1").Documents(context.Background()).GetAll()
	if err != nil || len(shards) == 0 {
		t.Fatalf("the roster has %d shards, %v", len(shards), err)
	}
	for _, s := range shards {
		if _, err := s.Ref.Delete(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.now = e.now.Add(time.Minute)
	reps := e.tick(t, "tick-2")
	if reps[0].Roster != "list" {
		t.Errorf("the tick took its organizations by %s, want list", reps[0].Roster)
	}
	if got := e.dispatched("tick-2", orgIDs(12)...); len(got) != 10 {
		t.Errorf("tick-2 dispatched %d organizations, want the 10 enabled", len(got))
	}
}
