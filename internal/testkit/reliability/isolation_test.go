package reliability_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// isolationCase is one workflow's tenant scope: how a document is judged to belong to a scope,
// and what a query of a scoped run must look like.
type isolationCase struct {
	name   string
	build  func(*testing.T) *rig
	scopes int // seeded alike; the run takes the second
	// scopeOf names the scope a document belongs to, by its scope field or its path.
	scopeOf func(path string, data map[string]any) string
	// scopeKey names a seeded scope as scopeOf does.
	scopeKey func(tr trialRows) string
	// query says what is wrong with one query of a run on tr's scope ("" when nothing).
	query func(lq loggedQuery, tr trialRows) string
	// widen doctors a query of the run so that it reaches past the scope.
	widen func(lq loggedQuery) loggedQuery
	// mayRead, when set, names documents outside the scope the run may read all the same.
	mayRead func(before docs, tr trialRows) map[string]bool
}

func byField(collections []string, field string) func(string, map[string]any) string {
	return func(path string, data map[string]any) string {
		if slices.Contains(collections, collectionOf(path)) {
			v, _ := data[field].(string)
			return v
		}
		return "other: " + collectionOf(path)
	}
}

func inputOf(field string) func(trialRows) string {
	return func(tr trialRows) string { return fmt.Sprint(tr.input[field]) }
}

func withoutFilters(lq loggedQuery) loggedQuery {
	q := proto.Clone(lq.query).(*firestorepb.StructuredQuery)
	q.Where = nil
	return loggedQuery{parent: lq.parent, query: q}
}

func isolationCases() []isolationCase {
	executions := func(name string, build func(*testing.T) *rig) isolationCase {
		return isolationCase{
			name: name, build: build, scopes: 3,
			scopeOf: func(path string, data map[string]any) string {
				if collectionOf(path) == ledger.OrganizationsCollection { // its opt-out, read by each settling transaction
					return strings.TrimPrefix(path, ledger.OrganizationsCollection+"/")
				}
				return byField([]string{ledger.ExecutionsCollection}, "organization_uuid")(path, data)
			},
			scopeKey: inputOf("organization_uuid"),
			query: func(lq loggedQuery, tr trialRows) string {
				return scopedBy(lq, "", ledger.ExecutionsCollection, map[string]string{"organization_uuid": inputOf("organization_uuid")(tr)})
			},
			widen: withoutFilters,
		}
	}
	return []isolationCase{
		executions("cloud-run", cloudRunRig),
		executions("kubernetes", kubernetesRig),
		{
			name: "lease-settle", build: leaseSettleRig, scopes: 3,
			scopeOf: func(path string, data map[string]any) string {
				if collectionOf(path) == ledger.RunnerGroupsCollection {
					return strings.TrimPrefix(path, ledger.RunnerGroupsCollection+"/")
				}
				return byField([]string{ledger.WorkspaceLeasesCollection, ledger.RunnerInstancesCollection}, "runner_group_uuid")(path, data)
			},
			scopeKey: inputOf("runner_group_uuid"),
			query: func(lq loggedQuery, tr trialRows) string {
				return scopedBy(lq, "", ledger.WorkspaceLeasesCollection, map[string]string{
					"organization_uuid": inputOf("organization_uuid")(tr), "runner_group_uuid": inputOf("runner_group_uuid")(tr),
				})
			},
			widen: withoutFilters,
			// The holders the scope's leases name, wherever they are registered, and the opt-out
			// of the group's organization.
			mayRead: func(before docs, tr trialRows) map[string]bool {
				out := map[string]bool{ledger.OrganizationsCollection + "/" + inputOf("organization_uuid")(tr): true}
				for p, d := range before {
					if collectionOf(p) == ledger.WorkspaceLeasesCollection && d["runner_group_uuid"] == tr.input["runner_group_uuid"] {
						out[ledger.RunnerInstancesCollection+"/"+fmt.Sprint(d["holder_runner_instance_uuid"])] = true
					}
				}
				return out
			},
		},
		{
			name: "pm-sweep", build: pmSweepRig, scopes: 3,
			// A task, its chains and its queue are the queue's by path.
			scopeOf: func(path string, _ map[string]any) string {
				if rest, ok := strings.CutPrefix(path, ledger.TaskQueuesCollection+"/"); ok {
					q, _, _ := strings.Cut(rest, "/")
					return q
				}
				return "other: " + collectionOf(path)
			},
			scopeKey: inputOf("queue"),
			query: func(lq loggedQuery, tr trialRows) string {
				return scopedBy(lq, ledger.TaskQueuesCollection+"/"+inputOf("queue")(tr), ledger.TasksCollection, nil)
			},
			widen: func(lq loggedQuery) loggedQuery {
				return loggedQuery{parent: ledger.TaskQueuesCollection + "/another-queue", query: lq.query}
			},
		},
		{
			// No tenant scope: the run covers every tenant's invocations, and nothing else.
			name: "runs-sweep", build: runsSweepRig, scopes: 2,
			scopeOf: func(path string, _ map[string]any) string {
				if c := collectionOf(path); c == ledger.ExtensionRunsCollection || c == ledger.ExtensionInterlocksCollection {
					return "extensions"
				}
				return "other: " + collectionOf(path)
			},
			scopeKey: func(trialRows) string { return "extensions" },
			query: func(lq loggedQuery, _ trialRows) string {
				return scopedBy(lq, "", ledger.ExtensionRunsCollection, nil)
			},
			widen: func(lq loggedQuery) loggedQuery {
				q := proto.Clone(lq.query).(*firestorepb.StructuredQuery)
				q.From[0].CollectionId = ledger.ExecutionsCollection
				return loggedQuery{parent: lq.parent, query: q}
			},
		},
	}
}

func TestARunScopedToOneTenantReadsWritesAndQueriesNothingOfAnother(t *testing.T) {
	for _, c := range isolationCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := c.build(t)
			var seeded []trialRows
			for i := range c.scopes {
				seeded = append(seeded, r.seed(t, i))
			}
			putDocs(t, r.fs, bystanders(r.clock.Now()))
			mine := seeded[1]
			key := c.scopeKey(mine)
			before := mustDump(t, r)

			r.spy.Reset()
			r.queries.reset()
			out, err := r.start(ctx, uuid.NewString(), mine.input)
			if err != nil || out.Status != workflow.StateCompleted {
				t.Fatalf("run on %s: %v %v", key, err, out.Err)
			}
			reads, writes, queries := docPaths(r.spy.Reads()), writePaths(r.spy.Writes()), r.queries.all()
			after := mustDump(t, r)

			owner := func(p string) string {
				if d, ok := before[p]; ok {
					return c.scopeOf(p, d)
				}
				return c.scopeOf(p, after[p])
			}
			extra := map[string]bool{}
			if c.mayRead != nil {
				extra = c.mayRead(before, mine)
			}
			mayRead := func(p string) bool { return bookkeeping(p) || owner(p) == key || extra[p] }
			mayWrite := func(p string) bool { return bookkeeping(p) || owner(p) == key }
			outside := func(p string) bool { return !bookkeeping(p) && owner(p) != key }

			// (a) Reads and writes stay in the scope.
			for _, p := range append(strayDocs("read", reads, mayRead), strayDocs("wrote", writes, mayWrite)...) {
				t.Error(p)
			}
			for verb, paths := range map[string][]string{"read": reads, "wrote": writes} {
				if !slices.ContainsFunc(paths, func(p string) bool { return !bookkeeping(p) && owner(p) == key }) {
					t.Fatalf("the run %s nothing of its own scope %s: the check would pass vacuously", verb, key)
				}
			}
			// (b) Every query, counts included, is held to the scope.
			if n := len(r.spy.Queries()); n != len(queries) || n == 0 {
				t.Fatalf("the spy saw %d queries and the log %d", n, len(queries))
			}
			for _, lq := range queries {
				if msg := c.query(lq, mine); msg != "" {
					t.Error(msg)
				}
			}
			// (c) Every other scope's documents are as they were.
			for _, p := range changedOutside(before, after, outside) {
				t.Error(p)
			}

			// Each check reports a doctored input: a read of another scope's document, a query
			// that reaches past the scope, a changed document of another scope. The document is
			// another seeded scope's or, for the fleet-wide sweep, which has no other, a
			// bystander's.
			other := ""
			for _, p := range slices.Sorted(maps.Keys(before)) {
				if outside(p) && !extra[p] && (owner(p) == c.scopeKey(seeded[0]) || c.scopeKey(seeded[0]) == key) {
					other = p
					break
				}
			}
			if other == "" {
				t.Fatal("no document of another scope was seeded")
			}
			if len(strayDocs("read", append(slices.Clone(reads), other), mayRead)) == 0 {
				t.Errorf("a read of %s, of another scope, is not reported", other)
			}
			if msg := c.query(c.widen(queries[0]), mine); msg == "" {
				t.Errorf("a query widened past the scope is not reported: %v", c.widen(queries[0]))
			}
			doctored := maps.Clone(after)
			doctored[other] = maps.Clone(after[other])
			doctored[other]["doctored"] = true
			if len(changedOutside(before, doctored, outside)) == 0 {
				t.Errorf("a change to %s, of another scope, is not reported", other)
			}
		})
	}
}

// The pipeline's path: one sync message, decided with its receipt, reads and writes its row and
// that receipt, and runs no query.
func TestASyncMessageTouchesOnlyItsRowAndItsRunsReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := cloudRunRig(t)
	mine := r.seed(t, 0)
	r.seed(t, 1)
	putDocs(t, r.fs, bystanders(r.clock.Now()))
	row := mine.rows[0] // its execution succeeded
	id := fsspy.DocID(row.doc)
	snap, err := r.fs.Doc(row.doc).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen ledger.Execution
	if err := snap.DataTo(&seen); err != nil {
		t.Fatal(err)
	}
	req := message.Sync{
		WorkflowRunUUID: uuid.NewString(), OrganizationUUID: fmt.Sprint(mine.input["organization_uuid"]),
		RunnerExecutionUUID: id, Provider: ledger.ProviderCloudRun, ProviderRef: seen.ProviderRef, ObservedAt: seen.ObservedAt,
	}
	// The run that published the message, still publishing its syncs: a message is honoured only
	// for such a run.
	now := r.clock.Now().UTC()
	if err := r.runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: req.WorkflowRunUUID, WorkflowType: string(contract.ExecutionSyncCloudRun),
		Status: workflow.StateReconciling, InitialData: map[string]any{"organization_uuid": req.OrganizationUUID}, InitiatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	run := ledger.RunsCollection + "/" + req.WorkflowRunUUID
	organization := ledger.OrganizationsCollection + "/" + req.OrganizationUUID
	receipt := run + "/" + ledger.SyncsCollection + "/" + id
	before := mustDump(t, r)

	r.spy.Reset()
	r.queries.reset()
	if res := r.syncer.SyncOnce(ctx, req); res.Outcome != executionsync.SyncSettled {
		t.Fatalf("sync = %+v, want settled", res)
	}
	reads, writes := docPaths(r.spy.Reads()), writePaths(r.spy.Writes())
	after := mustDump(t, r)

	// It reads its row, the organization's opt-out, the run, the workflow's pauses of the fleet
	// and of the organization, and the receipt, and writes only the row and the receipt.
	only := func(p string) bool { return p == row.doc || p == receipt }
	pauses := []string{
		pausestore.PausesCollection + "/" + pausestore.PauseID(string(contract.ExecutionSyncCloudRun), ""),
		pausestore.PausesCollection + "/" + pausestore.PauseID(string(contract.ExecutionSyncCloudRun), req.OrganizationUUID),
	}
	readable := func(p string) bool { return only(p) || p == run || p == organization || slices.Contains(pauses, p) }
	for _, p := range append(strayDocs("read", reads, readable), strayDocs("wrote", writes, only)...) {
		t.Error(p)
	}
	if !slices.Contains(writes, row.doc) || !slices.Contains(writes, receipt) {
		t.Errorf("writes = %v, want the row and its receipt", writes)
	}
	if q := r.queries.all(); len(q) != 0 {
		t.Errorf("a sync ran %d queries, want none", len(q))
	}
	for _, p := range changedOutside(before, after, func(p string) bool { return !only(p) }) {
		t.Error(p)
	}
	b, a := state{}, state{}
	flatten(b, row.doc, before[row.doc])
	flatten(a, row.doc, after[row.doc])
	if got, diffs := judge(b, a, row.change(req.WorkflowRunUUID)); got != changed {
		t.Errorf("the row is %s, want settled: %v", got, diffs)
	}
	if other := mine.rows[1].doc; len(strayDocs("read", append(slices.Clone(reads), other), only)) == 0 {
		t.Errorf("a read of %s, another row, is not reported", other)
	}
}

func mustDump(t *testing.T, r *rig) docs {
	t.Helper()
	d, err := dump(context.Background(), r.fs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bystanders are documents of every kind that belong to no scope a test runs on: another
// organization's executions, runner group, instance and lease, another queue's task, and a live
// app invocation (which is the runs sweep's, and live).
func bystanders(now time.Time) map[string]map[string]any {
	old := now.Add(-time.Hour)
	return map[string]map[string]any{
		ledger.ExecutionsCollection + "/bystander-cloud-run": executionDoc("bystander-org", ledger.ProviderCloudRun,
			map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/bystander"}, old),
		ledger.ExecutionsCollection + "/bystander-kubernetes": executionDoc("bystander-org", ledger.ProviderKubernetes,
			map[string]any{"cluster": "eu", "namespace": "runners", "job": "bystander", "uid": "uid-bystander"}, old),
		ledger.ExtensionRunsCollection + "/bystander-run": {"tenant_id": "bystander", "extension_id": "x", "job_name": "x", "background": false,
			"status": ledger.ExtensionRunning, "started_at": old, "last_moved_at": now.Add(-liveSince)},
		ledger.TaskQueuesCollection + "/bystander-queue/" + ledger.TasksCollection + "/bystander-task": {"slug": "x", "status": ledger.TaskWorking,
			"worker_id": "w", "created_at": old, "last_activity_at": old, "status_tip": "", "report_tip": "", "heartbeat_tip": "", "reclaim_count": int64(0)},
		ledger.RunnerGroupsCollection + "/bystander-group":       {"organization_uuid": "bystander-org", "heartbeat_timeout_seconds": int64(300)},
		ledger.RunnerInstancesCollection + "/bystander-instance": {"organization_uuid": "bystander-org", "runner_group_uuid": "bystander-group", "status": ledger.InstanceTerminated},
		ledger.WorkspaceLeasesCollection + "/bystander-lease": {"organization_uuid": "bystander-org", "runner_group_uuid": "bystander-group",
			"workspace_id": "ws", "holder_runner_instance_uuid": "bystander-instance", "status": ledger.LeaseActive, "acquired_at": old, "heartbeat_at": old},
	}
}
