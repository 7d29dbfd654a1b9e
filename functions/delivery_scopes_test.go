package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// This file seeds the scopes the at-least-once tests deliver to: one per message type, each
// with rows a single delivery settles, rows it must leave alone, and the messages to deliver.
// Every id is fresh, so a scope's documents are its own even where the workflow's scope is the
// whole fleet.

// docKind says which projection and which double-settlement rule a tracked document gets.
type docKind string

const (
	docExecution   docKind = "runner_execution"
	docExtension   docKind = "extension_run"
	docInterlock   docKind = "extension_interlock"
	docTask        docKind = "task"
	docLease       docKind = "workspace_lease"
	docUntouchable docKind = "untouchable" // a document no message may write: a holder, a group
)

// trackedDoc is one document of a scope, by role ("stale-failed") so that two scopes compare.
type trackedDoc struct {
	role string
	path string // relative to the database: "runner_executions/ID"
	kind docKind
}

// scope is one message type's world: what to deliver and what to look at afterwards.
type scope struct {
	primary    pubsubMessage   // the message under test, delivered 1, 2 or 5 times
	companions []pubsubMessage // other messages of the same scope, each delivered once
	// runs names every run that may write in the scope, by role: "primary" is the run the
	// primary message starts or belongs to; "earlier" an older run whose late sync is a
	// companion.
	runs map[string]string
	// recorded is true when the primary run's sweep_runs record is written by the deliveries
	// (it is started by a tick or a sweep message; a bare sync message's run is not).
	recorded bool
	// seeded names the roles whose run records the scope's setup wrote before any delivery (a
	// sync message is honoured only for a run that exists): no delivery may write them.
	seeded map[string]bool
	// pushedSweeps is how many sweep messages of the primary run the emulator pushes when the
	// primary message is delivered `copies` times; nil: as many as the scope's Dispatch
	// deliveries said they published (one by a delivery whose probe found the stale rows, none
	// by one that came after they were settled).
	pushedSweeps func(copies int) int
	docs         []trackedDoc
	guard        string // the primary run's guard document ("" when it takes none)
	// scopeRuns lists the run records of the scope started since `since`.
	scopeRuns func(ctx context.Context, fs *firestore.Client, since time.Time) ([]string, error)
	// counted is the output field (as flattened: a list's length is "NAME.len") in which the
	// primary run counts what it settled; "" when its receipts do (execution sync).
	counted string
}

// pubsubMessage is one Pub/Sub message as a test delivers it to a served target.
type pubsubMessage struct {
	target string // Dispatch, Sweep or SyncExecution
	id     string
	data   []byte
	attrs  map[string]string
}

// scopeSeeder seeds one message type's scope.
type scopeSeeder func(t *testing.T, w world) *scope

const (
	staleAge  = 2 * time.Hour   // how long ago a stale row was last observed or moved
	minAgeSec = 1800            // the execution-sync runs' min_age_seconds
	freshAge  = 1 * time.Minute // a row observed this recently is not stale
)

// execution seeds a runner execution of org observed at observedAt, whose Cloud Run execution
// is of kind.
func (w world) execution(t *testing.T, org string, kind rowKind, observedAt time.Time) string {
	t.Helper()
	id := uuid.NewString()
	name := cloudrunfake.ExecutionName("p", "l", "job", id)
	at := time.Now().Add(-3 * time.Hour)
	exec := cloudrunfake.Succeeded(name, at)
	switch kind {
	case kindFailed:
		exec = cloudrunfake.Failed(name, at, 0)
	case kindRunning:
		exec = cloudrunfake.Running(name, at)
	}
	if err := fake.SetExecution(exec); err != nil {
		t.Fatal(err)
	}
	_, err := w.fs.Collection(ledger.ExecutionsCollection).Doc(id).Set(context.Background(), map[string]any{
		"organization_uuid": org, "provider": ledger.ProviderCloudRun, "status": "running", "active": true,
		"observed_at": observedAt.Truncate(time.Microsecond), "provider_ref": map[string]any{"execution": name},
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// syncMessage is the sync message a run publishes for row, as pipeline.SyncStarter builds it.
func (w world) syncMessage(t *testing.T, run, org, row string) pubsubMessage {
	t.Helper()
	r := w.row(t, row)
	data, err := json.Marshal(message.Sync{
		WorkflowRunUUID: run, OrganizationUUID: org, RunnerExecutionUUID: row,
		Provider: r.Provider, ProviderRef: r.ProviderRef, ObservedAt: r.ObservedAt,
	})
	if err != nil {
		t.Fatal(err)
	}
	return pubsubMessage{target: "SyncExecution", id: "sync-" + uuid.NewString(), data: data, attrs: map[string]string{
		message.AttrWorkflowRunUUID: run, message.AttrRunnerExecutionUUID: row,
	}}
}

// tickMessage is a tick as Cloud Scheduler publishes it.
func tickMessage(id string, typ contract.WorkflowType, initial map[string]any) pubsubMessage {
	data, _ := json.Marshal(map[string]any{"workflow_type": typ, "initial_data": initial})
	return pubsubMessage{target: "Dispatch", id: id, data: data, attrs: map[string]string{message.AttrTrigger: "schedule"}}
}

// sweepMessage is the sweep message Dispatch publishes for tickID on scopeKey, whose initial
// data holds the tick's defaults and the scope's fields.
func sweepMessage(tickID string, typ contract.WorkflowType, initial map[string]any, scopeKey string) pubsubMessage {
	data, _ := json.Marshal(map[string]any{"workflow_type": typ, "initial_data": initial})
	return pubsubMessage{target: "Sweep", id: "sweep-" + uuid.NewString(), data: data, attrs: map[string]string{
		message.AttrTrigger:         "schedule",
		message.AttrWorkflowType:    string(typ),
		message.AttrWorkflowRunUUID: pipeline.RunUUID(tickID, typ, scopeKey),
		message.AttrTickID:          tickID,
	}}
}

// runsWhere lists the ids of run records matching field == value started since `since`.
func runsWhere(field string, value any) func(context.Context, *firestore.Client, time.Time) ([]string, error) {
	return func(ctx context.Context, fs *firestore.Client, since time.Time) ([]string, error) {
		snaps, err := fs.Collection(ledger.RunsCollection).Where(field, "==", value).Documents(ctx).GetAll()
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, s := range snaps {
			if at, _ := s.Data()["initiated_at"].(time.Time); !at.Before(since) {
				ids = append(ids, s.Ref.ID)
			}
		}
		return ids, nil
	}
}

// executionScope seeds an organization with sweeps enabled and six rows: three stale ones whose
// executions ended, one stale one still running (a run refreshes it), one observed a minute ago
// whose execution ended (only a late sync message of an earlier run settles it), and one fresh
// and running (nothing touches it).
func executionScope(t *testing.T, w world) (org string, docs []trackedDoc, lateSync pubsubMessage, earlier string) {
	t.Helper()
	org = uuid.NewString()
	if err := (ledgertest.Organizations{Client: w.fs}).Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
		t.Fatal(err)
	}
	stale, fresh := time.Now().Add(-staleAge), time.Now().Add(-freshAge)
	rows := []struct {
		role string
		kind rowKind
		at   time.Time
	}{
		{"stale-succeeded-1", kindSucceeded, stale}, {"stale-succeeded-2", kindSucceeded, stale},
		{"stale-failed", kindFailed, stale}, {"stale-running", kindRunning, stale},
		{"fresh-terminal", kindFailed, fresh}, {"fresh-running", kindRunning, time.Now()},
	}
	for _, r := range rows {
		id := w.execution(t, org, r.kind, r.at)
		docs = append(docs, trackedDoc{r.role, ledger.ExecutionsCollection + "/" + id, docExecution})
		if r.role == "fresh-terminal" {
			// An earlier run of the organization started this row's sync; its message is late.
			earlier = "earlier-" + uuid.NewString()
			w.sweepRun(t, earlier, org, id)
			lateSync = w.syncMessage(t, earlier, org, id)
		}
	}
	return org, docs, lateSync, earlier
}

func executionInitial(org string) map[string]any {
	return map[string]any{"organization_uuid": org, "min_age_seconds": minAgeSec, "limit": 25}
}

// tickScope: a tick for one organization (Dispatch), whose sweep message the emulator pushes.
func tickScope(t *testing.T, w world) *scope {
	org, docs, late, earlier := executionScope(t, w)
	tick := tickMessage("tick-"+uuid.NewString(), contract.ExecutionSyncCloudRun, executionInitial(org))
	return &scope{
		primary:      tick,
		companions:   []pubsubMessage{late},
		runs:         map[string]string{"primary": pipeline.RunUUID(tick.id, contract.ExecutionSyncCloudRun, org), "earlier": earlier},
		recorded:     true,
		seeded:       map[string]bool{"earlier": true},
		pushedSweeps: nil,
		docs:         docs,
		guard:        ledger.GuardsCollection + "/" + runstore.GuardKey(string(contract.ExecutionSyncCloudRun), org),
		scopeRuns:    runsWhere("initial_data.organization_uuid", org),
	}
}

// executionSweepScope: a sweep message of runner.execution-sync-stale-cloud-run; its tick is
// redelivered beside it, so the emulator pushes the same run's message once more.
func executionSweepScope(t *testing.T, w world) *scope {
	org, docs, late, earlier := executionScope(t, w)
	sc := redeliveredSweep(contract.ExecutionSyncCloudRun, executionInitial(org), org, docs,
		runsWhere("initial_data.organization_uuid", org), "", late)
	sc.runs["earlier"] = earlier
	sc.seeded = map[string]bool{"earlier": true}
	return sc
}

// syncScope: one run's sync messages for three rows of an organization (one failed, one
// succeeded, one still running); the first is the message under test, the others its siblings.
func syncScope(t *testing.T, w world) *scope {
	org := uuid.NewString()
	w.organization(t, org, true)
	run := "run-" + uuid.NewString()
	stale := time.Now().Add(-staleAge)
	var docs []trackedDoc
	var msgs []pubsubMessage
	var ids []string
	for _, r := range []struct {
		role string
		kind rowKind
	}{{"stale-failed", kindFailed}, {"stale-succeeded", kindSucceeded}, {"stale-running", kindRunning}} {
		id := w.execution(t, org, r.kind, stale)
		docs = append(docs, trackedDoc{r.role, ledger.ExecutionsCollection + "/" + id, docExecution})
		msgs = append(msgs, w.syncMessage(t, run, org, id))
		ids = append(ids, id)
	}
	w.sweepRun(t, run, org, ids...) // the run that published the syncs has ended
	return &scope{
		primary:      msgs[0],
		companions:   msgs[1:],
		runs:         map[string]string{"primary": run},
		seeded:       map[string]bool{"primary": true},
		pushedSweeps: func(int) int { return 0 },
		docs:         docs,
		scopeRuns:    runsWhere("initial_data.organization_uuid", org),
	}
}

// runsSweepScope: a sweep message of platform.extension.runs.sweep (the whole fleet) over a
// tenant of its own: three invocations idle for two hours (one in the background, holding its
// interlock) and two live ones; its tick is redelivered beside it.
func runsSweepScope(t *testing.T, w world) *scope {
	t.Helper()
	ctx := context.Background()
	old := time.Now().Add(-staleAge)
	idle := ledgertest.ExtensionRuns{Client: w.fs, Now: func() time.Time { return old }}
	live := ledgertest.ExtensionRuns{Client: w.fs}
	tenant := "tenant-" + uuid.NewString()
	var docs []trackedDoc
	for _, r := range []struct {
		role       string
		background bool
		store      ledgertest.ExtensionRuns
	}{
		{"idle-foreground-1", false, idle}, {"idle-foreground-2", false, idle}, {"idle-background", true, idle},
		{"live-background", true, live}, {"live-foreground", false, live},
	} {
		id, ext := "xrun-"+uuid.NewString(), "ext-"+r.role
		if err := r.store.Start(ctx, ledger.ExtensionRun{RunID: id, TenantID: tenant, ExtensionID: ext, JobName: "job", Background: r.background}, old); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, trackedDoc{r.role, ledger.ExtensionRunsCollection + "/" + id, docExtension})
		if r.background {
			docs = append(docs, trackedDoc{r.role + "-interlock", ledger.ExtensionInterlocksCollection + "/" + ledger.InterlockID(tenant, ext), docInterlock})
		}
	}
	initial := map[string]any{"older_than_ms": 10 * 60 * 1000, "limit": 200}
	return redeliveredSweep(contract.ExtensionRunsSweep, initial, "fleet", docs, runsWhere("workflow_type", string(contract.ExtensionRunsSweep)), "swept")
}

// pmSweepScope: a sweep message of pm.sweep over a queue of its own: two working tasks silent
// for two hours, one working task whose worker is alive, one new task; its tick (naming the
// queue) is redelivered beside it.
func pmSweepScope(t *testing.T, w world) *scope {
	t.Helper()
	ctx := context.Background()
	old := time.Now().Add(-staleAge)
	silent := ledgertest.Tasks{Client: w.fs, Now: func() time.Time { return old }}
	live := ledgertest.Tasks{Client: w.fs}
	queue := "q-" + uuid.NewString()
	var docs []trackedDoc
	for _, r := range []struct {
		role  string
		claim bool
		store ledgertest.Tasks
	}{{"silent-1", true, silent}, {"silent-2", true, silent}, {"live", true, live}, {"new", false, live}} {
		id := "task-" + uuid.NewString()
		at := old
		if r.store.Now == nil { // a live worker, on Firestore's clock: its own reads now
			at = time.Now()
		}
		if err := r.store.Enqueue(ctx, queue, id, r.role, at); err != nil {
			t.Fatal(err)
		}
		if r.claim {
			if _, err := r.store.Next(ctx, queue, "worker-"+r.role, at); err != nil {
				t.Fatal(err)
			}
		}
		docs = append(docs, trackedDoc{r.role, ledger.TaskQueuesCollection + "/" + queue + "/" + ledger.TasksCollection + "/" + id, docTask})
	}
	initial := map[string]any{"queue": queue, "ttl": 300}
	return redeliveredSweep(contract.PMSweep, initial, queue, docs, runsWhere("initial_data.queue", queue), "reclaimed.len")
}

// leaseSettleScope: a sweep message of runner.workspace-lease-settle over a runner group of its
// own (heartbeat timeout 300 s): a lease whose holder terminated, one whose holder is unknown
// with a heartbeat two hours old (both abandoned), one whose live holder is silent and one
// whose unknown holder heartbeat just now (both kept); its tick (naming the group) is
// redelivered beside it.
func leaseSettleScope(t *testing.T, w world) *scope {
	t.Helper()
	ctx := context.Background()
	org, group := uuid.NewString(), uuid.NewString()
	w.organization(t, org, true)
	old := time.Now().Add(-staleAge)
	stale := ledgertest.Leases{Client: w.fs, Now: func() time.Time { return old }}
	fresh := ledgertest.Leases{Client: w.fs}
	if err := fresh.PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 300}); err != nil {
		t.Fatal(err)
	}
	docs := []trackedDoc{{"group", ledger.RunnerGroupsCollection + "/" + group, docUntouchable}}
	instances := map[string]string{}
	for _, st := range []string{ledger.InstanceTerminated, ledger.InstanceRunning} {
		id := uuid.NewString()
		if err := fresh.PutInstance(ctx, ledger.RunnerInstance{UUID: id, OrganizationUUID: org, RunnerGroupUUID: group, Status: st}); err != nil {
			t.Fatal(err)
		}
		instances[st] = id
		docs = append(docs, trackedDoc{"instance-" + st, ledger.RunnerInstancesCollection + "/" + id, docUntouchable})
	}
	for _, l := range []struct {
		role, holder string
		store        ledgertest.Leases
	}{
		{"holder-terminated", instances[ledger.InstanceTerminated], fresh},
		{"holder-unknown-stale", uuid.NewString(), stale},
		{"holder-alive-silent", instances[ledger.InstanceRunning], stale},
		{"holder-unknown-fresh", uuid.NewString(), fresh},
	} {
		id := uuid.NewString()
		if err := l.store.Acquire(ctx, ledger.WorkspaceLease{UUID: id, OrganizationUUID: org, RunnerGroupUUID: group,
			WorkspaceID: "ws-" + l.role, HolderUUID: l.holder}, old); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, trackedDoc{l.role, ledger.WorkspaceLeasesCollection + "/" + id, docLease})
	}
	initial := map[string]any{"organization_uuid": org, "runner_group_uuid": group, "max_settlements": 50}
	return redeliveredSweep(contract.WorkspaceLeaseSettle, initial, org+"/"+group, docs, runsWhere("initial_data.runner_group_uuid", group), "settled")
}

// redeliveredSweep is the scope of a sweep message of typ over scopeKey whose tick is redelivered
// beside it (with also), so the emulator pushes the same run's message once more.
func redeliveredSweep(typ contract.WorkflowType, initial map[string]any, scopeKey string, docs []trackedDoc,
	scopeRuns func(context.Context, *firestore.Client, time.Time) ([]string, error), counted string, also ...pubsubMessage) *scope {
	tickID := "tick-" + uuid.NewString()
	sweep := sweepMessage(tickID, typ, initial, scopeKey)
	return &scope{
		primary:      sweep,
		companions:   append([]pubsubMessage{tickMessage(tickID, typ, initial)}, also...),
		runs:         map[string]string{"primary": sweep.attrs[message.AttrWorkflowRunUUID]},
		recorded:     true,
		pushedSweeps: nil,
		docs:         docs,
		guard:        ledger.GuardsCollection + "/" + runstore.GuardKey(string(typ), scopeKey),
		scopeRuns:    scopeRuns,
		counted:      counted,
	}
}

// roleOf names a run uuid by its role in sc: "-" for none, "unexpected" for a run not of sc.
func (sc *scope) roleOf(run string) string {
	if run == "" {
		return "-"
	}
	for role, r := range sc.runs {
		if r == run {
			return role
		}
	}
	return fmt.Sprintf("unexpected(%s)", run)
}
