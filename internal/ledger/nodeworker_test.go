package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// These tests hold docs/writers.md and docs/data-model.md to their promise that a worker in any
// language can be written from them alone: docs/examples/node-worker/worker.mjs was, in
// JavaScript against Firestore's REST API, and everything it writes must verify with the
// product's own code (ledger.EntryID, the chains' links, the task's fields and types) and
// interleave with the Go writers and the sweep's reclaim.

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found from the test's directory: %v", err)
	}
	return root
}

// node runs a Node.js script of the repository and returns its stdout; a missing node or a
// non-zero exit fails the test (never a skip: the contract would go unchecked).
func node(t *testing.T, script string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (Node.js 20 or later) is not on PATH: these tests check the documented writer contract with a JavaScript worker and cannot run without it: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := repoRoot(t)
	cmd := exec.CommandContext(ctx, bin, append([]string{filepath.Join(root, script)}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), firestoreconn.EmulatorEnv+"="+os.Getenv(firestoreconn.EmulatorEnv))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %q: %v\nstdout:\n%s\nstderr:\n%s", script, args, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

const workerScript = "docs/examples/node-worker/worker.mjs"

// nodeWorker runs one subcommand of the example worker and decodes its JSON line into out.
func nodeWorker(t *testing.T, out any, cmd, project, queue string, flags ...string) {
	t.Helper()
	raw := node(t, workerScript, append([]string{cmd, "--project", project, "--queue", queue}, flags...)...)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("worker.mjs %s printed %q: %v", cmd, raw, err)
	}
}

type nodeRandomRun struct {
	Tasks       []string `json:"tasks"`
	LeftWorking []struct {
		Task   string `json:"task"`
		Worker string `json:"worker"`
		Lease  string `json:"lease"`
	} `json:"left_working"`
	Entries int `json:"entries"`
}

type nodeClaim struct {
	Task  *string `json:"task"`
	Lease string  `json:"lease"`
}

type nodeHeartbeat struct {
	OK    bool   `json:"ok"`
	Lease string `json:"lease"`
	Error string `json:"error"`
}

// nodeHeartbeatOn runs the example worker's fenced heartbeat on a lease.
func nodeHeartbeatOn(t *testing.T, project, queue, task, worker, lease string) nodeHeartbeat {
	t.Helper()
	var hb nodeHeartbeat
	nodeWorker(t, &hb, "heartbeat", project, queue, "--task", task, "--worker", worker, "--lease", lease)
	return hb
}

var chainTips = map[string]string{
	ledger.ChainStatuses:   "status_tip",
	ledger.ChainReports:    "report_tip",
	ledger.ChainHeartbeats: "heartbeat_tip",
}

// payloadShapes are the payloads docs/writers.md lists, by chain: member names and their types.
var payloadShapes = map[string][]map[string]string{
	ledger.ChainStatuses: {
		{"status": "string"}, // new (enqueue), working, done (with worker_id)
		{"status": "string", "worker_id": "string"},
		{"reason": "string", "status": "string", "worker_id": "string"},
		{"reclaim_count": "int64", "reclaimed": "bool", "reclaimer": "string", "status": "string"},
		{"reason": "string", "reclaim_count": "int64", "reclaimed": "bool", "reclaimer": "string", "status": "string"},
	},
	ledger.ChainHeartbeats: {
		{"claim": "bool", "worker_id": "string"},
		{"worker_id": "string"},
		{"preempt": "bool", "reclaimer": "string"},
	},
	ledger.ChainReports: {
		{"body": "string", "worker_id": "string"},
	},
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case int64:
		return "int64"
	case time.Time:
		return "timestamp"
	case map[string]any:
		return "map"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func shapeOf(m map[string]any) map[string]string {
	s := make(map[string]string, len(m))
	for k, v := range m {
		s[k] = typeName(v)
	}
	return s
}

// verifyQueue reads every task of the queue and every entry of its three chains back with the
// Go client and holds them to the docs: each entry's id is ledger.EntryID of its content, each
// chain is one line from the task's tip back to an entry with prev "", and the task's fields have
// the types and values docs/writers.md gives. It returns the tasks' data by id and the number of
// entries verified.
func verifyQueue(t *testing.T, fs *firestore.Client, queue string) (map[string]map[string]any, int) {
	t.Helper()
	ctx := context.Background()
	tasks, err := fs.Collection(ledger.TaskQueuesCollection).Doc(queue).Collection(ledger.TasksCollection).Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) == 0 {
		t.Fatalf("queue %q has no tasks", queue)
	}
	out := map[string]map[string]any{}
	entries := 0
	for _, snap := range tasks {
		id, d := snap.Ref.ID, snap.Data()
		out[id] = d
		where := fmt.Sprintf("task %q", id)
		want := map[string]string{
			"slug": "string", "status": "string", "created_at": "timestamp", "last_activity_at": "timestamp",
			"status_tip": "string", "report_tip": "string", "heartbeat_tip": "string", "reclaim_count": "int64",
		}
		status, _ := d["status"].(string)
		switch status {
		case ledger.TaskNew:
		case ledger.TaskWorking, ledger.TaskDone:
			want["worker_id"] = "string"
		case ledger.TaskFailed:
			want["failure_reason"] = "string"
			if _, ok := d["worker_id"]; ok || d["reclaim_count"] == int64(0) { // a poison task has none
				want["worker_id"] = "string"
			}
		default:
			t.Errorf("%s: status %#v", where, d["status"])
		}
		if got := shapeOf(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fields and types\n  %v\nwant (docs/writers.md)\n  %v", where, got, want)
		}
		for chain, tipField := range chainTips {
			docs, err := snap.Ref.Collection(chain).Documents(ctx).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]ledger.Entry{}
			for _, e := range docs {
				ewhere := fmt.Sprintf("%s: %s/%s", where, chain, e.Ref.ID)
				raw := e.Data()
				if got := shapeOf(raw); !reflect.DeepEqual(got, map[string]string{"created_at": "timestamp", "prev": "string", "payload": "map"}) {
					t.Errorf("%s: fields and types %v", ewhere, got)
					continue
				}
				var entry ledger.Entry
				if err := e.DataTo(&entry); err != nil {
					t.Fatalf("%s: %v", ewhere, err)
				}
				sum, err := ledger.EntryID(id, chain, ledger.Entry{CreatedAt: entry.CreatedAt, Prev: entry.Prev, Payload: entry.Payload})
				if err != nil {
					t.Fatalf("%s: %v", ewhere, err)
				}
				if sum != e.Ref.ID {
					t.Errorf("%s: ledger.EntryID of its content is %s (created_at %s, prev %q, payload %#v)", ewhere, sum,
						entry.CreatedAt.UTC().Format(ledger.EntryTimeLayout), entry.Prev, entry.Payload)
				}
				if shape := shapeOf(entry.Payload); !slices.ContainsFunc(payloadShapes[chain], func(s map[string]string) bool { return reflect.DeepEqual(s, shape) }) {
					t.Errorf("%s: payload %#v is none of the shapes docs/writers.md lists", ewhere, entry.Payload)
				}
				byID[e.Ref.ID] = entry
				entries++
			}
			// One line from the tip back to the first entry, through every entry.
			tip, _ := d[tipField].(string)
			seen := 0
			for cur := tip; cur != ""; seen++ {
				e, ok := byID[cur]
				if !ok || seen > len(byID) {
					t.Errorf("%s: the %s chain from %s = %q breaks at %q (%d entries)", where, chain, tipField, tip, cur, len(byID))
					break
				}
				if seen == 0 && chain == ledger.ChainStatuses && e.Payload["status"] != status {
					t.Errorf("%s: status %q, but the status chain's head says %#v", where, status, e.Payload)
				}
				if seen == 0 && chain == ledger.ChainHeartbeats && status == ledger.TaskWorking && e.Payload["worker_id"] != d["worker_id"] {
					t.Errorf("%s: worker %#v, but the heartbeat chain's head is %#v", where, d["worker_id"], e.Payload)
				}
				if e.Prev == "" && chain == ledger.ChainStatuses && !reflect.DeepEqual(e.Payload, map[string]any{"status": "new"}) {
					t.Errorf("%s: the first status is %#v, not {status: new}", where, e.Payload)
				}
				cur = e.Prev
			}
			if seen != len(byID) {
				t.Errorf("%s: %d of the %s chain's %d entries are reachable from its tip", where, seen, chain, len(byID))
			}
		}
	}
	return out, entries
}

// taskSnap reads a task document.
func taskSnap(t *testing.T, fs *firestore.Client, queue, id string) *firestore.DocumentSnapshot {
	t.Helper()
	snap, err := fs.Collection(ledger.TaskQueuesCollection).Doc(queue).Collection(ledger.TasksCollection).Doc(id).Get(context.Background())
	if err != nil {
		t.Fatalf("task %q: %v", id, err)
	}
	return snap
}

func countEntries(t *testing.T, fs *firestore.Client, queue, id, chain string) int {
	t.Helper()
	docs, err := taskSnap(t, fs, queue, id).Ref.Collection(chain).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

// nodeRandom runs the example worker's seeded random run and checks what it left.
func nodeRandom(t *testing.T, fs *firestore.Client, project, queue string, seed, tasks int) nodeRandomRun {
	t.Helper()
	var run nodeRandomRun
	nodeWorker(t, &run, "random", project, queue, "--seed", fmt.Sprint(seed), "--tasks", fmt.Sprint(tasks))
	got, entries := verifyQueue(t, fs, queue)
	if len(run.Tasks) != tasks || len(got) != tasks {
		t.Fatalf("the run enqueued %q; the queue holds %d tasks; want %d", run.Tasks, len(got), tasks)
	}
	if entries != run.Entries {
		t.Errorf("the worker says it wrote %d entries; the chains hold %d", run.Entries, entries)
	}
	if len(run.LeftWorking) < 2 {
		t.Fatalf("the run left %d tasks working, want at least 2", len(run.LeftWorking))
	}
	working := map[string]bool{}
	for _, l := range run.LeftWorking {
		working[l.Task] = true
		d := got[l.Task]
		if d["status"] != ledger.TaskWorking || d["worker_id"] != l.Worker || d["heartbeat_tip"] != l.Lease {
			t.Errorf("task %q left working by %q with lease %s reads %v", l.Task, l.Worker, l.Lease, d)
		}
	}
	for _, id := range run.Tasks {
		if s := got[id]["status"]; !working[id] && s != ledger.TaskDone && s != ledger.TaskFailed {
			t.Errorf("task %q: status %v, want done or failed", id, s)
		}
	}
	return run
}

func TestAWorkerWrittenFromTheDocsInJavaScriptWritesEntriesTheProductVerifies(t *testing.T) {
	t.Parallel()
	queues := []string{"jobs", "queue <&> é日本😀", "q\u2028x"}
	for seed := 1; seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			project := testenv.Project()
			fs := testenv.FirestoreProject(t, project)
			run := nodeRandom(t, fs, project, queues[seed-1], seed, 5+seed)
			t.Logf("seed %d, queue %q: %d tasks, %d entries written in JavaScript verify with ledger.EntryID", seed, queues[seed-1], len(run.Tasks), run.Entries)
		})
	}
}

func TestTheSweepPreemptsAJavaScriptWorkerAndAnotherReclaimsTheTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	project := testenv.Project()
	fs := testenv.FirestoreProject(t, project)
	store := ledger.NewTaskStore(fs, ledger.TxConfig{})
	const queue = "interplay<&>"
	run := nodeRandom(t, fs, project, queue, 7, 4)
	dead, alive := run.LeftWorking[0], run.LeftWorking[1]

	// The sweep reclaims the dead worker's task, on what it saw.
	seen, err := ledgertest.Value(store.Row(ctx, queue, dead.Task))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := store.ReclaimTask(ctx, queue, dead.Task, "sweeper<&>", nil, time.Now(), pmsweep.Reclaimable(seen, 0))
	if err != nil || !rc.Reclaimed {
		t.Fatalf("ReclaimTask = %+v, %v", rc, err)
	}
	before := taskSnap(t, fs, queue, dead.Task)
	preempt := before.Data()["heartbeat_tip"].(string)
	heartbeats := countEntries(t, fs, queue, dead.Task, ledger.ChainHeartbeats)

	// The old worker comes back: its fenced heartbeat is refused and writes nothing.
	hb := nodeHeartbeatOn(t, project, queue, dead.Task, dead.Worker, dead.Lease)
	if hb.OK || hb.Error != "head moved" {
		t.Fatalf("a heartbeat on the preempted lease printed %+v, want ok:false, head moved", hb)
	}
	after := taskSnap(t, fs, queue, dead.Task)
	if !after.UpdateTime.Equal(before.UpdateTime) || !reflect.DeepEqual(after.Data(), before.Data()) {
		t.Fatalf("the refused heartbeat changed the task:\n  before %v\n  after  %v", before.Data(), after.Data())
	}
	if n := countEntries(t, fs, queue, dead.Task, ledger.ChainHeartbeats); n != heartbeats {
		t.Fatalf("the refused heartbeat wrote an entry: %d heartbeats, was %d", n, heartbeats)
	}

	// The live worker's lease still holds.
	hb = nodeHeartbeatOn(t, project, queue, alive.Task, alive.Worker, alive.Lease)
	if !hb.OK || hb.Lease == "" || hb.Lease == alive.Lease {
		t.Fatalf("a heartbeat on a live lease printed %+v", hb)
	}
	if tip := taskSnap(t, fs, queue, alive.Task).Data()["heartbeat_tip"]; tip != hb.Lease {
		t.Fatalf("heartbeat_tip %v, the worker's new lease %s", tip, hb.Lease)
	}

	// Another JavaScript worker claims the requeued task; its claim heartbeat follows the preempt.
	var c nodeClaim
	nodeWorker(t, &c, "claim", project, queue, "--worker", "node-second<&>")
	if c.Task == nil || *c.Task != dead.Task {
		t.Fatalf("claim printed %+v, want the reclaimed task %q", c, dead.Task)
	}
	claimed := taskSnap(t, fs, queue, dead.Task)
	d := claimed.Data()
	if d["status"] != ledger.TaskWorking || d["worker_id"] != "node-second<&>" || d["heartbeat_tip"] != c.Lease || d["reclaim_count"] != int64(1) {
		t.Fatalf("the claimed task reads %v", d)
	}
	hbSnap, err := claimed.Ref.Collection(ledger.ChainHeartbeats).Doc(c.Lease).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var claim ledger.Entry
	if err := hbSnap.DataTo(&claim); err != nil {
		t.Fatal(err)
	}
	if claim.Prev != preempt || !reflect.DeepEqual(claim.Payload, map[string]any{"claim": true, "worker_id": "node-second<&>"}) {
		t.Fatalf("the claim heartbeat is %+v, want prev %s (the preempt)", claim, preempt)
	}
	// The old worker again, now that the task is working under another lease: only the lease
	// check refuses it.
	hb = nodeHeartbeatOn(t, project, queue, dead.Task, dead.Worker, dead.Lease)
	if hb.OK || hb.Error != "head moved" {
		t.Fatalf("a heartbeat on the preempted lease of a task claimed again printed %+v, want ok:false, head moved", hb)
	}
	if again := taskSnap(t, fs, queue, dead.Task); !again.UpdateTime.Equal(claimed.UpdateTime) {
		t.Fatalf("the refused heartbeat changed the task claimed again: %v", again.Data())
	}
	var none nodeClaim
	nodeWorker(t, &none, "claim", project, queue, "--worker", "node-second<&>")
	if none.Task != nil {
		t.Fatalf("a claim on a queue with no new task printed %+v", none)
	}
	_, entries := verifyQueue(t, fs, queue)
	t.Logf("after the reclaim and the second claim: %d entries verify", entries)
}

func TestJavaScriptAndGoWritersShareAQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	project := testenv.Project()
	fs := testenv.FirestoreProject(t, project)
	worker := ledgertest.Tasks{Client: fs}
	const queue = "mixed"

	// Go enqueues, JavaScript claims and heartbeats.
	goTask := "go-task<&>é日本😀\u2028"
	if err := worker.Enqueue(ctx, queue, goTask, "from go <&>", time.Now()); err != nil {
		t.Fatal(err)
	}
	var c nodeClaim
	nodeWorker(t, &c, "claim", project, queue, "--worker", "node<&>-1")
	if c.Task == nil || *c.Task != goTask {
		t.Fatalf("claim printed %+v, want %q", c, goTask)
	}
	hb := nodeHeartbeatOn(t, project, queue, goTask, "node<&>-1", c.Lease)
	if !hb.OK {
		t.Fatalf("heartbeat printed %+v", hb)
	}
	// and Go finishes it on the JavaScript worker's lease.
	if err := worker.Complete(ctx, ledgertest.Lease{Queue: queue, TaskID: goTask, WorkerID: "node<&>-1", HeartbeatTip: hb.Lease}, time.Now()); err != nil {
		t.Fatal(err)
	}

	// JavaScript enqueues, Go claims, heartbeats and reports.
	jsTask := "node-task 😀<&>\u2028"
	var ok struct{ OK bool }
	nodeWorker(t, &ok, "enqueue", project, queue, "--task", jsTask, "--slug", "from node <&>")
	if !ok.OK {
		t.Fatal("enqueue did not print ok")
	}
	lease, err := worker.Next(ctx, queue, "go-worker<&>", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if lease.TaskID != jsTask {
		t.Fatalf("Next claimed %q, want %q", lease.TaskID, jsTask)
	}
	if lease, err = worker.Heartbeat(ctx, lease, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Report(ctx, lease, "from go: \"ok\"", time.Now()); err != nil {
		t.Fatal(err)
	}
	// and the JavaScript worker's fence holds the Go lease too.
	hb = nodeHeartbeatOn(t, project, queue, jsTask, "go-worker<&>", lease.HeartbeatTip)
	if !hb.OK {
		t.Fatalf("heartbeat on the Go lease printed %+v", hb)
	}
	if _, err := worker.Heartbeat(ctx, lease, time.Now()); err == nil {
		t.Fatal("a Go heartbeat on the lease the JavaScript heartbeat moved was not refused")
	}

	got, entries := verifyQueue(t, fs, queue)
	if got[goTask]["status"] != ledger.TaskDone || got[jsTask]["status"] != ledger.TaskWorking || got[jsTask]["heartbeat_tip"] != hb.Lease {
		t.Fatalf("tasks read %v", got)
	}
	t.Logf("%d entries written by both verify", entries)
}

// TestTheVectorsVerifyInJavaScript runs docs/contract/verify-vectors.mjs, which rebuilds every
// vector of docs/contract/chain-vectors.json with JavaScript's own JSON.stringify.
func TestTheVectorsVerifyInJavaScript(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "contract", "chain-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name string `json:"name"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("chain-vectors.json has no vectors")
	}
	out := string(node(t, "docs/contract/verify-vectors.mjs"))
	oks := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ok ") {
			oks++
		}
	}
	if oks != len(f.Vectors) {
		t.Fatalf("%d ok lines for %d vectors:\n%s", oks, len(f.Vectors), out)
	}
	t.Logf("%d vectors verify in JavaScript", oks)
}
