package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

const ticksTopic = "stalesweep-ticks"

// continuations are the tick continuations published so far, oldest first.
func (f *fakePubSub) continuations(t *testing.T) []pipeline.Tick {
	t.Helper()
	var out []pipeline.Tick
	for _, m := range f.srv.Messages() {
		if m.Attributes[message.AttrDispatchAfter] == "" {
			continue
		}
		start, err := message.ParseStart(m.Data)
		if err != nil {
			t.Fatalf("a continuation does not decode: %v", err)
		}
		resume, err := message.Continuation(m.Attributes, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pipeline.Tick{WorkflowType: start.WorkflowType, InitialData: start.InitialData,
			Trigger: m.Attributes[message.AttrTrigger], TickID: resume.TickID, After: resume.After, Roster: resume.Roster})
	}
	return out
}

// runsPublished counts the sweep messages published per run uuid.
func (f *fakePubSub) runsPublished() map[string]int {
	out := map[string]int{}
	for _, m := range f.srv.Messages() {
		if run := m.Attributes[message.AttrWorkflowRunUUID]; run != "" {
			out[run]++
		}
	}
	return out
}

// A tick has no cap: an invocation that has enumerated its share hands the rest on, and the
// continuations reach every enabled organization once, under the tick's own id. A continuation
// delivered twice names the same runs.
func TestATickGoesOnUntilEveryOrganizationIsDispatched(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 23, 3)
	e.ps = newPubSub(t, pipeline.SweepsDefault, ticksTopic)
	d := e.build(pipeline.DispatcherOptions{Config: pipeline.DispatchConfig{PageSize: 4, ShardScopes: 8}, TicksTopic: ticksTopic})
	ctx := context.Background()

	rep, err := d.Dispatch(ctx, tick)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scopes != 8 || rep.Published != 8 || rep.Continued == "" {
		t.Fatalf("first invocation %+v, want 8 published and the rest handed on", rep)
	}
	for handled := 0; ; handled++ {
		conts := e.ps.continuations(t)
		if len(conts) == handled {
			break
		}
		if handled > 10 {
			t.Fatal("the continuations do not end")
		}
		next := conts[handled]
		if next.TickID != tick.TickID || next.WorkflowType != tick.WorkflowType || !sameJSON(next.InitialData, tick.InitialData) {
			t.Fatalf("continuation %+v is not the tick's", next)
		}
		if _, err := d.Dispatch(ctx, next); err != nil {
			t.Fatal(err)
		}
		if handled == 0 { // the first continuation, delivered twice
			if _, err := d.Dispatch(ctx, next); err != nil {
				t.Fatal(err)
			}
		}
	}
	runs := e.ps.runsPublished()
	for _, org := range e.enabled {
		if runs[pipeline.RunUUID(tick.TickID, tick.WorkflowType, org)] == 0 {
			t.Errorf("organization %s was never dispatched", org)
		}
	}
	for _, org := range e.disabled {
		if runs[pipeline.RunUUID(tick.TickID, tick.WorkflowType, org)] != 0 {
			t.Errorf("opted-out organization %s was dispatched", org)
		}
	}
	if len(runs) != len(e.enabled) {
		t.Errorf("%d distinct runs published, want %d", len(runs), len(e.enabled))
	}
	// 23 organizations, 8 per invocation: two continuations, the first delivered twice.
	if n := len(e.ps.continuations(t)); n != 3 {
		t.Errorf("%d continuations published, want 3 (two, one of them again on its redelivery)", n)
	}
}

// A continuation without its tick's id is malformed: it could not name the tick's runs.
func TestAContinuationWithoutItsTickIsRefused(t *testing.T) {
	if _, err := message.Continuation(map[string]string{message.AttrDispatchAfter: "org"}, "m1"); err == nil {
		t.Error("a continuation without a tick id was read")
	}
	if _, err := message.Continuation(map[string]string{message.AttrDispatchAfter: "org", message.AttrTickID: "t", message.AttrRoster: "rebuild-all"}, "m1"); err == nil {
		t.Error("a continuation with an unknown roster attribute was read")
	}
	r, err := message.Continuation(map[string]string{message.AttrTickID: "spoofed", message.AttrRoster: message.RosterBuild}, "m1")
	if err != nil || r != (message.Resume{TickID: "m1"}) {
		t.Errorf("a first delivery read as %+v %v; want its own message id alone", r, err)
	}
}

// probeEnv is a fleet of organizations on the emulator, behind a spy, with the Cloud Run sync's
// real probe.
type probeEnv struct {
	dispatchEnv
	spy   *fsspy.Spy
	store *ledger.ExecutionStore
	now   time.Time
	def   workflow.Definition
}

func newProbeEnv(t *testing.T, orgs int) *probeEnv {
	t.Helper()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	e := &probeEnv{spy: spy, store: ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{}), now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	e.fs, e.orgs, e.ps = fs, orgadmin.New(fs), newPubSub(t, pipeline.SweepsDefault)
	bw := fs.BulkWriter(context.Background())
	for range orgs {
		id := uuid.NewString()
		if _, err := bw.Set(fs.Collection(ledger.OrganizationsCollection).Doc(id), ledger.Organization{UUID: id, SweepsEnabled: true}); err != nil {
			t.Fatal(err)
		}
		e.enabled = append(e.enabled, id)
	}
	bw.End()
	slices.Sort(e.enabled)
	wf, err := executionsync.New(e.store, nil, nil, executionsync.Config{Provider: ledger.ProviderCloudRun}, func() time.Time { return e.now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.def = wf.Definition(executionsync.CloudRun)
	return e
}

// rows puts n active Cloud Run rows of org observed at `at`, with a provider reference or not.
func (e *probeEnv) rows(t *testing.T, org string, n int, at time.Time, ref bool) {
	t.Helper()
	bw := e.fs.BulkWriter(context.Background())
	for i := range n {
		row := ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: at}
		if ref {
			row.ProviderRef = map[string]any{"execution": fmt.Sprintf("projects/p/locations/l/jobs/j/executions/e%d", i)}
		}
		if _, err := bw.Set(e.fs.Collection(ledger.ExecutionsCollection).NewDoc(), row); err != nil {
			t.Fatal(err)
		}
	}
	bw.End()
}

func (e *probeEnv) dispatcher(defs definitions) *pipeline.Dispatcher {
	return pipeline.NewDispatcher(pipeline.DispatcherOptions{Orgs: e.orgs, Publisher: e.ps.pub, SweepsTopic: pipeline.SweepsDefault, Workflows: defs,
		Log: logging.Discard(), Config: pipeline.DispatchConfig{PageSize: 50}, Probe: ledgertest.LocalClock(func() time.Time { return e.now })})
}

// A quiet organization costs its probe — one query, no invocation, no run, no write — and only
// the organizations with a stale row get a sweep. One whose stale rows can never be settled (no
// provider reference) gets its own sweep and takes nothing from the others.
func TestOnlyOrganizationsWithStaleRowsAreDispatched(t *testing.T) {
	t.Parallel()
	e := newProbeEnv(t, 40)
	old, fresh := e.now.Add(-10*time.Minute), e.now.Add(-30*time.Second)
	stale := []string{e.enabled[3], e.enabled[17], e.enabled[31]}
	for _, org := range stale {
		e.rows(t, org, 1, old, true)
	}
	e.rows(t, e.enabled[5], 3, fresh, true)  // active, not stale yet: quiet
	e.rows(t, e.enabled[9], 500, old, false) // stale forever: it has work of its own
	stale = append(stale, e.enabled[9])
	defs := seeded()
	defs[contract.ExecutionSyncCloudRun] = e.def
	e.spy.Reset()

	rep, err := e.dispatcher(defs).Dispatch(context.Background(), tick)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scopes != 40 || rep.Probed != 40 || rep.Quiet != 36 || rep.Published != 4 || rep.ProbeErrors != 0 {
		t.Errorf("report %+v, want 40 probed, 36 quiet, 4 published", rep)
	}
	runs := e.ps.runsPublished()
	for _, org := range stale {
		if runs[pipeline.RunUUID(tick.TickID, tick.WorkflowType, org)] != 1 {
			t.Errorf("organization %s with stale rows was not dispatched once", org)
		}
	}
	if len(runs) != len(stale) {
		t.Errorf("%d runs published, want %d", len(runs), len(stale))
	}
	if w := e.spy.Writes(); len(w) != 0 {
		t.Errorf("the dispatch wrote %d documents, want none", len(w))
	}
	// The probes ask for 30 organizations at once: one query per batch of 30, and one more per
	// organization with work, each of at most one document, each served by a declared index.
	probes := 0
	for _, q := range e.spy.Queries() {
		if sh := fsspy.Shape(q); sh.Collection == ledger.ExecutionsCollection {
			probes++
			if q.GetLimit().GetValue() != 1 {
				t.Errorf("a probe asks for %d documents, want 1", q.GetLimit().GetValue())
			}
			if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
				t.Errorf("the probe's query %+v has no index in indexes.Composite", sh)
			}
		}
	}
	if want := 2 + len(stale); probes != want {
		t.Errorf("%d probe queries, want %d (2 batches of up to 30, and one per organization with work)", probes, want)
	}
}

// A probe that fails publishes the sweeps of the scopes it asked for: a probe never hides work.
// The other batches are still probed.
func TestAFailedProbePublishesItsScopes(t *testing.T) {
	t.Parallel()
	e := newProbeEnv(t, 40)
	broken := e.enabled[2] // in the first batch of 30
	def := e.def
	real := def.Probe
	def.Probe = func(ctx context.Context, inputs []json.RawMessage, now time.Time) ([]bool, error) {
		for _, input := range inputs {
			var in struct {
				OrganizationUUID string `json:"organization_uuid"`
			}
			_ = json.Unmarshal(input, &in)
			if in.OrganizationUUID == broken {
				return nil, errors.New("injected: the probe's query failed")
			}
		}
		return real(ctx, inputs, now)
	}
	defs := seeded()
	defs[contract.ExecutionSyncCloudRun] = def
	rep, err := e.dispatcher(defs).Dispatch(context.Background(), tick)
	if err != nil {
		t.Fatal(err)
	}
	runs := e.ps.runsPublished()
	if rep.ProbeErrors != 30 || rep.Published != 30 || rep.Quiet != 10 {
		t.Errorf("report %+v, want the 30 scopes of the failed batch published and the other 10 quiet", rep)
	}
	for _, org := range e.enabled[:30] {
		if runs[pipeline.RunUUID(tick.TickID, tick.WorkflowType, org)] != 1 {
			t.Errorf("organization %s, asked by the failed probe, was not published", org)
		}
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
