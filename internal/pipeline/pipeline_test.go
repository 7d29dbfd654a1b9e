package pipeline_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/google/uuid"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// failSwitch is a pstest reactor that fails every Publish while on.
type failSwitch struct{ on atomic.Bool }

func (f *failSwitch) React(any) (bool, any, error) {
	if f.on.Load() {
		return true, nil, status.Error(codes.PermissionDenied, "injected: publisher lacks roles/pubsub.publisher")
	}
	return false, nil, nil
}

type fakePubSub struct {
	srv    *pstest.Server
	client *pubsub.Client
	pub    *pipeline.TopicPublisher
	fail   *failSwitch
}

func newPubSub(t *testing.T, topics ...string) *fakePubSub {
	t.Helper()
	f := &fakePubSub{fail: &failSwitch{}}
	f.srv = pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: f.fail})
	t.Cleanup(func() { f.srv.Close() })
	conn, err := grpc.NewClient(f.srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	f.client, err = pubsub.NewClient(context.Background(), "proj", option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.client.Close() })
	for _, topic := range topics {
		if _, err := f.client.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: "projects/proj/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
	}
	f.pub = pipeline.NewTopicPublisher(f.client, 5*time.Second, 4)
	t.Cleanup(f.pub.Stop)
	return f
}

// sweeps decodes every message published, by its run uuid.
func (f *fakePubSub) sweeps(t *testing.T) map[string]message.Start {
	t.Helper()
	out := map[string]message.Start{}
	for _, m := range f.srv.Messages() {
		s, err := message.ParseStart(m.Data)
		if err != nil {
			t.Fatalf("published message is not a start: %v", err)
		}
		out[m.Attributes[message.AttrWorkflowRunUUID]] = s
	}
	return out
}

type dispatchEnv struct {
	fs       *firestore.Client
	orgs     *orgadmin.Store
	ps       *fakePubSub
	enabled  []string
	disabled []string
}

func newDispatchEnv(t *testing.T, enabled, disabled int) dispatchEnv {
	t.Helper()
	fs := testenv.Firestore(t)
	e := dispatchEnv{fs: fs, orgs: orgadmin.New(fs), ps: newPubSub(t, pipeline.SweepsDefault)}
	for i := range enabled + disabled {
		id := uuid.NewString()
		if err := (ledgertest.Organizations{Client: e.fs}).Put(context.Background(), ledger.Organization{UUID: id, SweepsEnabled: i < enabled}); err != nil {
			t.Fatal(err)
		}
		if i < enabled {
			e.enabled = append(e.enabled, id)
		} else {
			e.disabled = append(e.disabled, id)
		}
	}
	return e
}

func (e dispatchEnv) dispatcher(cfg pipeline.DispatchConfig) *pipeline.Dispatcher {
	return e.build(pipeline.DispatcherOptions{Config: cfg})
}

// build is the dispatcher o describes, on the env's organizations and Pub/Sub, of the seeded
// workflows.
func (e dispatchEnv) build(o pipeline.DispatcherOptions) *pipeline.Dispatcher {
	o.Orgs, o.Publisher, o.SweepsTopic, o.Log, o.Workflows = e.orgs, e.ps.pub, pipeline.SweepsDefault, logging.Discard(), seeded()
	return pipeline.NewDispatcher(o)
}

var tick = pipeline.Tick{
	WorkflowType: contract.ExecutionSyncCloudRun,
	InitialData:  json.RawMessage(`{"min_age_seconds": 120, "limit": 50}`),
	Trigger:      "schedule",
	TickID:       "tick-1",
}

func TestDispatchPublishesOneSweepPerEnabledOrganization(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 10, 4)
	rep, err := e.dispatcher(pipeline.DispatchConfig{PageSize: 3}).Dispatch(context.Background(), tick)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scopes != 10 || rep.Published != 10 || rep.Failed != 0 || rep.Capped {
		t.Errorf("report = %+v", rep)
	}
	sweeps := e.ps.sweeps(t)
	for _, org := range e.enabled {
		run := pipeline.RunUUID(tick.TickID, tick.WorkflowType, org)
		s, ok := sweeps[run]
		if !ok {
			t.Errorf("no sweep message for organization %s (run %s)", org, run)
			continue
		}
		var in map[string]any
		_ = json.Unmarshal(s.InitialData, &in)
		if in["organization_uuid"] != org || in["min_age_seconds"] != float64(120) || in["limit"] != float64(50) || s.WorkflowType != tick.WorkflowType {
			t.Errorf("sweep message for %s = %s %s", org, s.WorkflowType, s.InitialData)
		}
		if _, err := contract.Validate(s.WorkflowType, s.InitialData); err != nil {
			t.Errorf("sweep message for %s is not a valid run: %v", org, err)
		}
	}
	for _, m := range e.ps.srv.Messages() {
		if m.Attributes[message.AttrTrigger] != "schedule" || m.Attributes[message.AttrTickID] != "tick-1" {
			t.Errorf("attributes = %v", m.Attributes)
		}
	}
}

func TestARedeliveredTickNamesTheSameRuns(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 3, 0)
	d := e.dispatcher(pipeline.DispatchConfig{})
	for range 2 {
		if _, err := d.Dispatch(context.Background(), tick); err != nil {
			t.Fatal(err)
		}
	}
	other := tick
	other.TickID = "tick-2"
	if _, err := d.Dispatch(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, m := range e.ps.srv.Messages() {
		runs[m.Attributes[message.AttrWorkflowRunUUID]]++
	}
	if len(runs) != 6 {
		t.Errorf("%d distinct runs over two deliveries of one tick and one other tick, want 6 (3 + 3)", len(runs))
	}
	for _, org := range e.enabled {
		if runs[pipeline.RunUUID("tick-1", tick.WorkflowType, org)] != 2 || runs[pipeline.RunUUID("tick-2", tick.WorkflowType, org)] != 1 {
			t.Errorf("organization %s: runs %v", org, runs)
		}
	}
}

func TestATickNamingOneOrganizationDispatchesOnlyIt(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 3, 1)
	one := tick
	one.InitialData = json.RawMessage(`{"organization_uuid": "` + e.enabled[1] + `"}`)
	rep, err := e.dispatcher(pipeline.DispatchConfig{}).Dispatch(context.Background(), one)
	if err != nil {
		t.Fatal(err)
	}
	sweeps := e.ps.sweeps(t)
	if rep.Published != 1 || len(sweeps) != 1 {
		t.Fatalf("report %+v, %d messages", rep, len(sweeps))
	}
	if _, ok := sweeps[pipeline.RunUUID(tick.TickID, tick.WorkflowType, e.enabled[1])]; !ok {
		t.Errorf("the named organization's run is missing: %v", sweeps)
	}
}

// The opt-out holds whatever a tick names: naming an organization that opted out (or has no
// organizations document) publishes nothing, and says so in the report, for the organization-
// and the runner-group-scoped workflows alike.
func TestATickNamingAnOrganizationThatOptedOutPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 1, 1)
	d := e.build(pipeline.DispatcherOptions{
		ListGroups: func(context.Context, string, int) ([]string, error) { return []string{uuid.NewString()}, nil },
	})
	for _, org := range []string{e.disabled[0], uuid.NewString()} {
		for _, typ := range []contract.WorkflowType{contract.ExecutionSyncCloudRun, contract.WorkspaceLeaseSettle} {
			named := tick
			named.WorkflowType = typ
			named.InitialData = json.RawMessage(`{"organization_uuid": "` + org + `"}`)
			rep, err := d.Dispatch(context.Background(), named)
			if err != nil || rep.Published != 0 || rep.Disabled != 1 {
				t.Errorf("%s naming %s: report %+v, err %v; want nothing published, disabled 1", typ, org, rep, err)
			}
		}
	}
	if n := len(e.ps.srv.Messages()); n != 0 {
		t.Errorf("%d messages published", n)
	}
}

func TestAnInvalidTickPublishesNothing(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 3, 0)
	d := e.dispatcher(pipeline.DispatchConfig{})
	for name, bad := range map[string]pipeline.Tick{
		"limit 0":         {WorkflowType: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{"limit": 0}`), TickID: "t"},
		"unknown field":   {WorkflowType: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{"limitt": 5}`), TickID: "t"},
		"not an object":   {WorkflowType: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`[1]`), TickID: "t"},
		"not implemented": {WorkflowType: contract.PMSweep, TickID: "t"},
		"bad scope":       {WorkflowType: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{"organization_uuid": "acme"}`), TickID: "t"},
	} {
		_, err := d.Dispatch(context.Background(), bad)
		if contract.CodeOf(err) != contract.CodeValidationFailed {
			t.Errorf("%s: err = %v, want validation_failed", name, err)
		}
	}
	if n := len(e.ps.srv.Messages()); n != 0 {
		t.Errorf("invalid ticks published %d messages", n)
	}
}

func TestDispatchCountsPublishFailuresAndAsksForRedelivery(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 5, 0)
	e.ps.fail.on.Store(true)
	rep, err := e.dispatcher(pipeline.DispatchConfig{}).Dispatch(context.Background(), tick)
	if err == nil || rep.Failed != 5 || rep.Published != 0 {
		t.Errorf("report %+v err %v, want 5 failed and an error", rep, err)
	}
}

func TestRunUUID(t *testing.T) {
	a := pipeline.RunUUID("m1", contract.ExecutionSyncCloudRun, "org")
	if a != pipeline.RunUUID("m1", contract.ExecutionSyncCloudRun, "org") {
		t.Error("not deterministic")
	}
	for _, b := range []string{
		pipeline.RunUUID("m2", contract.ExecutionSyncCloudRun, "org"),
		pipeline.RunUUID("m1", contract.ExecutionSyncKubernetes, "org"),
		pipeline.RunUUID("m1", contract.ExecutionSyncCloudRun, "org2"),
	} {
		if a == b {
			t.Error("different ticks, types or scopes share a run uuid")
		}
	}
	if uuid.Validate(a) != nil {
		t.Errorf("%q is not a uuid", a)
	}
	if first, second := pipeline.RunUUID("", contract.ExecutionSyncCloudRun, "org"), pipeline.RunUUID("", contract.ExecutionSyncCloudRun, "org"); first == second {
		t.Error("without a tick id the run uuid must be fresh")
	}
}

func TestTheFleetSweepIsOneMessageAndItsFloorIsCheckedBeforePublishing(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 3, 0)
	d := e.dispatcher(pipeline.DispatchConfig{})
	low := pipeline.Tick{WorkflowType: contract.ExtensionRunsSweep, InitialData: json.RawMessage(`{"older_than_ms": 1000}`), TickID: "t1"}
	if _, err := d.Dispatch(context.Background(), low); contract.CodeOf(err) != contract.CodeValidationFailed {
		t.Errorf("below the floor: %v, want validation_failed", err)
	}
	if n := len(e.ps.srv.Messages()); n != 0 {
		t.Fatalf("a tick below the floor published %d messages", n)
	}
	ok := pipeline.Tick{WorkflowType: contract.ExtensionRunsSweep, InitialData: json.RawMessage(`{"older_than_ms": 3600000}`), TickID: "t2"}
	rep, err := d.Dispatch(context.Background(), ok)
	if err != nil || rep.Published != 1 {
		t.Fatalf("fleet tick: %+v %v", rep, err)
	}
	m := e.ps.srv.Messages()[0]
	if m.Attributes[message.AttrWorkflowRunUUID] != pipeline.RunUUID("t2", contract.ExtensionRunsSweep, "fleet") {
		t.Errorf("attributes = %v", m.Attributes)
	}
}

func TestQueueScopedTicksGoToEveryQueue(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ps := newPubSub(t, pipeline.SweepsDefault)
	tasks := ledger.NewTaskStore(fs, ledger.TxConfig{})
	for _, q := range []string{"builds", "deploys", "reports"} {
		if err := (ledgertest.Tasks{Client: fs}).Enqueue(context.Background(), q, "t1", "s", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	build := func(cfg pipeline.DispatchConfig) *pipeline.Dispatcher {
		return pipeline.NewDispatcher(pipeline.DispatcherOptions{Orgs: orgadmin.New(fs), Publisher: ps.pub, SweepsTopic: pipeline.SweepsDefault,
			Workflows: seeded(), Log: logging.Discard(), Config: cfg, ListQueues: tasks.ListQueues})
	}
	d := build(pipeline.DispatchConfig{PageSize: 2})
	rep, err := d.Dispatch(context.Background(), pipeline.Tick{WorkflowType: contract.PMSweep, InitialData: json.RawMessage(`{"ttl": 600}`), TickID: "t"})
	if err != nil || rep.Published != 3 || rep.Capped {
		t.Fatalf("report %+v err %v", rep, err)
	}
	// A list without a cursor that reaches ListMax says so.
	capped := build(pipeline.DispatchConfig{ListMax: 3})
	if rep, err := capped.Dispatch(context.Background(), pipeline.Tick{WorkflowType: contract.PMSweep, InitialData: json.RawMessage(`{"ttl": 600}`), TickID: "t-capped"}); err != nil || !rep.Capped {
		t.Errorf("queues listed up to ListMax: report %+v err %v, want capped", rep, err)
	}
	queues := map[string]bool{}
	for _, s := range ps.sweeps(t) {
		var in map[string]any
		_ = json.Unmarshal(s.InitialData, &in)
		queues[in["queue"].(string)] = in["ttl"] == float64(600)
	}
	if len(queues) != 3 || !queues["builds"] || !queues["deploys"] || !queues["reports"] {
		t.Errorf("sweep messages cover %v", queues)
	}
}

func TestGroupScopedTicksGoToEveryGroupOfEveryEnabledOrganization(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t, 2, 1)
	leases := ledger.NewLeaseStore(e.fs, ledger.TxConfig{})
	groups := map[string][]string{}
	all := append(append([]string{}, e.enabled...), e.disabled...)
	for _, org := range all {
		for range 3 {
			g := uuid.NewString()
			if err := (ledgertest.Leases{Client: e.fs}).PutGroup(context.Background(), ledger.RunnerGroup{UUID: g, OrganizationUUID: org, HeartbeatTimeoutSeconds: 60}); err != nil {
				t.Fatal(err)
			}
			groups[org] = append(groups[org], g)
		}
	}
	d := e.build(pipeline.DispatcherOptions{Config: pipeline.DispatchConfig{PageSize: 1}, ListGroups: leases.ListGroups})
	rep, err := d.Dispatch(context.Background(), pipeline.Tick{WorkflowType: contract.WorkspaceLeaseSettle, InitialData: json.RawMessage(`{"max_settlements": 20}`), TickID: "g"})
	if err != nil || rep.Published != 6 || rep.Capped {
		t.Fatalf("report %+v err %v", rep, err)
	}
	capped := e.build(pipeline.DispatcherOptions{Config: pipeline.DispatchConfig{ListMax: 3}, ListGroups: leases.ListGroups})
	if rep, err := capped.Dispatch(context.Background(), pipeline.Tick{WorkflowType: contract.WorkspaceLeaseSettle, InitialData: json.RawMessage(`{"max_settlements": 20}`), TickID: "g-capped"}); err != nil || !rep.Capped {
		t.Errorf("groups listed up to ListMax: report %+v err %v, want capped", rep, err)
	}
	sweeps := e.ps.sweeps(t)
	for _, org := range e.enabled {
		for _, g := range groups[org] {
			s, ok := sweeps[pipeline.RunUUID("g", contract.WorkspaceLeaseSettle, org+"/"+g)]
			var in map[string]any
			_ = json.Unmarshal(s.InitialData, &in)
			if !ok || in["organization_uuid"] != org || in["runner_group_uuid"] != g || in["max_settlements"] != float64(20) {
				t.Errorf("group %s of %s: %v %s", g, org, ok, s.InitialData)
			}
		}
	}
	one := pipeline.Tick{WorkflowType: contract.WorkspaceLeaseSettle, TickID: "h",
		InitialData: json.RawMessage(`{"organization_uuid": "` + e.enabled[0] + `"}`)}
	if rep, err := d.Dispatch(context.Background(), one); err != nil || rep.Published != 3 {
		t.Errorf("a tick naming an organization: %+v %v", rep, err)
	}
	exact := pipeline.Tick{WorkflowType: contract.WorkspaceLeaseSettle, TickID: "i",
		InitialData: json.RawMessage(`{"organization_uuid": "` + e.enabled[0] + `", "runner_group_uuid": "` + groups[e.enabled[0]][1] + `"}`)}
	if rep, err := d.Dispatch(context.Background(), exact); err != nil || rep.Published != 1 {
		t.Errorf("a tick naming a group: %+v %v", rep, err)
	}
}

// definitions is a set of workflow definitions as Dispatch sees them.
type definitions map[contract.WorkflowType]workflow.Definition

func (d definitions) Definition(t contract.WorkflowType) (workflow.Definition, bool) {
	def, ok := d[t]
	return def, ok
}

// seeded is every seeded workflow as its own package declares it, with its default scheduled
// rules (the runs sweep's 60 s floor, pm.sweep's TTL floor); Dispatch reads nothing else of them.
func seeded() definitions {
	out := definitions{}
	for _, def := range []workflow.Definition{
		{Declaration: executionsync.CloudRun.Declaration},
		{Declaration: executionsync.Kubernetes.Declaration},
		runssweep.New(nil, runssweep.Config{}, nil).Definition(),
		pmsweep.New(nil, pmsweep.Config{}, nil).Definition(),
		leasesettle.New(nil, leasesettle.Config{}, nil).Definition(),
	} {
		out[def.Type] = def
	}
	return out
}
