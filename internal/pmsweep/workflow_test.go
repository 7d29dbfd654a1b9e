package pmsweep_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

type env struct {
	sweeptest.Env
	tasks  *ledger.TaskStore
	worker ledgertest.Tasks
	wf     *pmsweep.Workflow
	queue  string
}

func newEnv(t *testing.T, cfg pmsweep.Config, wrap func(pmsweep.Store) pmsweep.Store) *env {
	e := &env{Env: sweeptest.NewEnv(t, epoch), queue: "q-" + uuid.NewString()[:8]}
	e.tasks = ledger.NewTaskStore(e.FS, ledger.TxConfig{})
	e.worker = ledgertest.Tasks{Client: e.FS, Now: e.Clock.Now}
	e.wf = pmsweep.New(sweeptest.Wrap[pmsweep.Store](e.tasks, wrap), cfg, ledger.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	return e
}

// claimed enqueues n tasks and has a worker claim each; it returns their leases.
func (e *env) claimed(n int) []ledgertest.Lease {
	e.T.Helper()
	ctx := context.Background()
	for i := range n {
		if err := e.worker.Enqueue(ctx, e.queue, fmt.Sprintf("task-%03d", i), fmt.Sprintf("slug-%03d", i), e.Clock.Now()); err != nil {
			e.T.Fatal(err)
		}
	}
	leases := make([]ledgertest.Lease, 0, n)
	for i := range n {
		l, err := e.worker.Next(ctx, e.queue, fmt.Sprintf("worker-%d", i), e.Clock.Now())
		if err != nil {
			e.T.Fatal(err)
		}
		leases = append(leases, l)
	}
	return leases
}

// zombieChangesNothing has a worker holding the stale lease zombie heartbeat, report, complete
// and fail its task: each is refused, head moved, and none writes a document.
func (e *env) zombieChangesNothing(zombie ledgertest.Lease) {
	e.T.Helper()
	t, ctx := e.T, context.Background()
	e.Spy.Reset()
	if _, err := e.worker.Heartbeat(ctx, zombie, e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
		t.Errorf("zombie heartbeat: %v, want head moved", err)
	}
	if _, err := e.worker.Report(ctx, zombie, "done!", e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
		t.Errorf("zombie report: %v, want head moved", err)
	}
	if err := e.worker.Complete(ctx, zombie, e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
		t.Errorf("zombie completion: %v, want head moved", err)
	}
	if err := e.worker.Fail(ctx, zombie, "gave up", e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
		t.Errorf("zombie failure: %v, want head moved", err)
	}
	if n := len(e.Spy.Writes()); n != 0 {
		t.Errorf("the zombie's attempts wrote %d documents", n)
	}
}

func (e *env) sweep(input pmsweep.Input) pmsweep.Output {
	e.T.Helper()
	if input.Queue == "" {
		input.Queue = e.queue
	}
	if input.TTL == 0 {
		input.TTL = 300
	}
	if input.Reclaimer == "" {
		input.Reclaimer = "test-sweeper"
	}
	raw, _ := json.Marshal(input)
	out := sweeptest.Completed(e.T, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal}, "sweep")
	var o pmsweep.Output
	testenv.Decode(e.T, out.Output, &o)
	return o
}

func (e *env) task(id string) ledger.Task {
	e.T.Helper()
	t, err := e.tasks.GetTask(context.Background(), e.queue, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return t
}

func (e *env) chain(id, chain string) []ledger.Entry {
	e.T.Helper()
	c, err := e.tasks.Chain(context.Background(), e.queue, id, chain, 1000)
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}

func TestStaleTasksAreReclaimedAndComeBackFromNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	e.fourTasks()
	o := e.sweep(pmsweep.Input{TTL: 300, Reclaimer: "janitor-7"})
	// Tasks 0 and 1 are 300 s silent: not more than the TTL yet.
	if o.Scanned != 4 || o.Stale != 0 || len(o.Reclaimed) != 0 {
		t.Fatalf("at exactly the TTL: %+v", o)
	}
	e.Clock.Advance(time.Second)
	o = e.sweep(pmsweep.Input{TTL: 300, Reclaimer: "janitor-7"})
	if o.Scanned != 4 || o.Stale != 2 || len(o.Reclaimed) != 2 || len(o.Raced) != 0 || o.DryRun || o.TTL != 300 {
		t.Fatalf("output = %+v", o)
	}
	got := []string{}
	for _, r := range o.Reclaimed {
		got = append(got, r.Task)
		task := e.task(r.Task)
		if task.Status != ledger.TaskNew || task.ReclaimCount != 1 || task.WorkerID != "" || r.ReclaimStatusSHA != task.StatusTip || r.AgeSeconds != 301 {
			t.Errorf("reclaimed task %s = %+v (output %+v)", r.Task, task, r)
		}
		statuses, beats := e.chain(r.Task, ledger.ChainStatuses), e.chain(r.Task, ledger.ChainHeartbeats)
		if statuses[0].Payload["reclaimed"] != true || statuses[0].Payload["reclaimer"] != "janitor-7" || statuses[0].Payload["status"] != ledger.TaskNew {
			t.Errorf("status head = %+v", statuses[0])
		}
		if beats[0].Payload["preempt"] != true || beats[0].Prev != beats[1].ID {
			t.Errorf("heartbeat head = %+v, want a preempt chained on the worker's heartbeat %s", beats[0], beats[1].ID)
		}
		if statuses[0].ID != entryID(r.Task, ledger.ChainStatuses, statuses[0]) {
			t.Errorf("entry id %s is not the hash of its content", statuses[0].ID)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"task-000", "task-001"}) {
		t.Errorf("reclaimed %v", got)
	}
	b, _ := json.Marshal(o)
	var keys map[string]any
	_ = json.Unmarshal(b, &keys)
	if len(keys) != 6 {
		t.Errorf("output keys = %v, want exactly the seed's six", keys)
	}
	// The reclaimed tasks are handed out again.
	for range 2 {
		l, err := e.worker.Next(ctx, e.queue, "worker-new", e.Clock.Now())
		if err != nil || !slices.Contains(got, l.TaskID) {
			t.Errorf("next after the reclaim: %+v %v", l, err)
		}
	}
	if _, err := e.worker.Next(ctx, e.queue, "worker-new", e.Clock.Now()); !errors.Is(err, ledgertest.ErrNoTask) {
		t.Errorf("a third next: %v, want ErrNoTask (tasks 2 and 3 are still their workers')", err)
	}
}

// racer lets a live worker heartbeat between the sweep's snapshot and its reclaim.
type racer struct {
	pmsweep.Store
	before func(id string)
}

func (r *racer) ReclaimTask(ctx context.Context, queue, id, reclaimer string, pauses []string, now time.Time, decide func(ledger.Task) ledger.ReclaimPlan) (ledger.Reclaim, error) {
	r.before(id)
	return r.Store.ReclaimTask(ctx, queue, id, reclaimer, pauses, now, decide)
}

// racedSweep claims two tasks and leaves them silent for ten minutes; touch acts for the first
// task's live worker (who names it in failures) just before the sweep's transaction of that task.
// It sweeps, and fails t unless the live worker's task was raced and left to it, and the other
// reclaimed. It returns the env and that worker's lease, as touch left it.
func racedSweep(t *testing.T, who string, touch func(e *env, live *ledgertest.Lease)) (*env, *ledgertest.Lease) {
	t.Helper()
	var rc *racer
	e := newEnv(t, pmsweep.Config{}, func(s pmsweep.Store) pmsweep.Store { rc = &racer{Store: s}; return rc })
	leases := e.claimed(2)
	e.Clock.Advance(10 * time.Minute)
	live := leases[0]
	rc.before = func(id string) {
		if id == live.TaskID {
			touch(e, &live)
		}
	}
	o := e.sweep(pmsweep.Input{})
	if len(o.Raced) != 1 || o.Raced[0].Task != live.TaskID || len(o.Reclaimed) != 1 || o.Reclaimed[0].Task != leases[1].TaskID {
		t.Fatalf("output = %+v, want %s's task raced and the other reclaimed", o, who)
	}
	if task := e.task(live.TaskID); task.Status != ledger.TaskWorking || task.WorkerID != live.WorkerID || task.HeartbeatTip != live.HeartbeatTip {
		t.Errorf("%s lost its task: %+v", who, task)
	}
	return e, &live
}

func TestAHeartbeatBetweenSnapshotAndReclaimWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, live := racedSweep(t, "the heartbeating worker", func(e *env, live *ledgertest.Lease) {
		var err error
		if *live, err = e.worker.Heartbeat(ctx, *live, e.Clock.Now()); err != nil {
			t.Errorf("the live worker's heartbeat: %v", err)
		}
	})
	if _, err := e.worker.Heartbeat(ctx, *live, e.Clock.Now()); err != nil {
		t.Errorf("the live worker's next heartbeat: %v", err)
	}
	for _, s := range e.chain(live.TaskID, ledger.ChainStatuses) {
		if s.Payload["reclaimed"] == true {
			t.Error("a reclaim status was appended to the raced task")
		}
	}
}

func TestAZombieCanChangeNothingAfterItsTaskIsReclaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	zombie := e.claimed(1)[0]
	if _, err := e.worker.Report(ctx, zombie, "halfway", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(10 * time.Minute)
	if o := e.sweep(pmsweep.Input{}); len(o.Reclaimed) != 1 {
		t.Fatalf("sweep: %+v", o)
	}
	before := e.task(zombie.TaskID)
	e.zombieChangesNothing(zombie)
	if after := e.task(zombie.TaskID); after != before {
		t.Errorf("the task changed: %+v → %+v", before, after)
	}
}

func TestConcurrentSweepsAppendOneReclaimStatusPerTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	leases := e.claimed(200)
	e.Clock.Advance(10 * time.Minute)
	outs := make([]pmsweep.Output, 4)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, _, err := e.wf.RunOnce(context.Background(), pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: fmt.Sprintf("sweeper-%d", i)}, true, logging.Discard()) // every task is silent: past the storm guard
			if err != nil {
				t.Error(err)
			}
			outs[i] = o
		}()
	}
	wg.Wait()
	total, raced := 0, 0
	for _, o := range outs {
		total += len(o.Reclaimed)
		raced += len(o.Raced)
	}
	t.Logf("4 concurrent sweeps over 200 stale tasks: %d reclaimed, %d raced", total, raced)
	if total != 200 {
		t.Errorf("%d reclaims in all, want 200", total)
	}
	for _, l := range leases {
		n := 0
		for _, s := range e.chain(l.TaskID, ledger.ChainStatuses) {
			if s.Payload["reclaimed"] == true {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %s has %d reclaim statuses, want exactly 1", l.TaskID, n)
		}
	}
}

// worker heartbeats its task every interval of simulated time; the sweep runs at the worst
// moment, just before each heartbeat.
func TestLiveWorkersAtTTLOver3AreNeverReclaimedAndSlowOnesAre(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := func(interval time.Duration, rounds int) (reclaimed int, warnings int, lost int) {
		e := newEnv(t, pmsweep.Config{}, nil)
		leases := e.claimed(5)
		for range rounds {
			e.Clock.Advance(interval)
			o := e.sweep(pmsweep.Input{TTL: 300})
			reclaimed += len(o.Reclaimed)
			warnings += len(o.Warnings)
			for i, l := range leases {
				next, err := e.worker.Heartbeat(ctx, l, e.Clock.Now())
				switch {
				case errors.Is(err, ledgertest.ErrHeadMoved):
					lost++
				case err != nil:
					t.Fatal(err)
				default:
					leases[i] = next
				}
			}
		}
		return reclaimed, warnings, lost
	}
	if r, w, lost := run(100*time.Second, 30); r != 0 || w != 0 || lost != 0 {
		t.Errorf("heartbeats every TTL/3 over 30 rounds: %d reclaimed, %d warnings, %d heartbeats refused; want none", r, w, lost)
	}
	if r, w, _ := run(250*time.Second, 5); r != 0 || w == 0 {
		t.Errorf("heartbeats every 250 s of a 300 s TTL: %d reclaimed, %d warnings; want none reclaimed and a warning", r, w)
	}
	if r, _, lost := run(301*time.Second, 1); r != 5 || lost != 5 {
		t.Errorf("heartbeats slower than the TTL: %d reclaimed, %d heartbeats refused; want 5 and 5", r, lost)
	}
}

func TestDryRunReportsAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	e.claimed(3)
	e.Clock.Advance(10 * time.Minute)
	e.Spy.Reset()
	o, _, err := e.wf.RunOnce(context.Background(), pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "r", DryRun: true}, false, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if !o.DryRun || o.Stale != 3 || len(o.Reclaimed) != 3 || o.Reclaimed[0].ReclaimStatusSHA != "" {
		t.Errorf("dry run output = %+v", o)
	}
	sweeptest.NoWrites(t, e.Spy, "the dry run") // its read-only transactions commit, writing nothing
	if task := e.task("task-000"); task.Status != ledger.TaskWorking {
		t.Errorf("the dry run changed a task: %+v", task)
	}
}

func TestAPoisonTaskIsFailedInsteadOfRequeuedForever(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{MaxReclaims: 2}, nil)
	ctx := context.Background()
	e.claimed(1)
	for round := 1; round <= 3; round++ {
		e.Clock.Advance(10 * time.Minute)
		o := e.sweep(pmsweep.Input{})
		task := e.task("task-000")
		if round < 3 && (len(o.Reclaimed) != 1 || len(o.Poisoned) != 0) {
			t.Fatalf("round %d: %+v, want it reclaimed", round, o)
		}
		if round == 3 && (len(o.Reclaimed) != 0 || len(o.Poisoned) != 1 || o.Poisoned[0].Task != "task-000" || o.Poisoned[0].ReclaimStatusSHA != task.StatusTip) {
			t.Fatalf("round %d: %+v, want it listed poisoned, with the failed status %s, and not reclaimed", round, o, task.StatusTip)
		}
		if round < 3 {
			if task.Status != ledger.TaskNew {
				t.Fatalf("round %d: %+v", round, task)
			}
			if _, err := e.worker.Next(ctx, e.queue, "w", e.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if task.Status != ledger.TaskFailed || task.ReclaimCount != 3 || !strings.Contains(task.FailureReason, "poison") {
			t.Errorf("after the third reclaim: %+v", task)
		}
	}
	if _, err := e.worker.Next(ctx, e.queue, "w", e.Clock.Now()); !errors.Is(err, ledgertest.ErrNoTask) {
		t.Errorf("a poison task was handed out again: %v", err)
	}
}

func TestTwoWorkersNeverClaimTheSameTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	for i := range 20 {
		if err := e.worker.Enqueue(ctx, e.queue, fmt.Sprintf("t%02d", i), "s", e.Clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claims := map[string]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for busy := 0; ; {
				l, err := e.worker.Next(ctx, e.queue, fmt.Sprintf("w%d", w), e.Clock.Now())
				if errors.Is(err, ledgertest.ErrNoTask) {
					return
				}
				if errors.Is(err, ledgertest.ErrQueueBusy) && busy < 20 {
					busy++ // every candidate was being claimed: as a worker does, ask again
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := claims[l.TaskID]; dup {
					t.Errorf("task %s claimed by %s and %s", l.TaskID, prev, l.WorkerID)
				}
				claims[l.TaskID] = l.WorkerID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(claims) != 20 {
		t.Errorf("%d tasks claimed, want 20", len(claims))
	}
}

func TestInputIsTheSeedsFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	for input, field := range map[string]string{
		`{"ttl": 0}`:           "ttl",
		`{"ttl": "5m"}`:        "ttl",
		`{"queue": "a/b"}`:     "queue",
		`{"queue": ""}`:        "queue",
		`{"reclaimer": ""}`:    "reclaimer",
		`{"dry_run": "yes"}`:   "dry_run",
		`{"dryrun": true}`:     "dryrun",
		`{"ttl": 1e10}`:        "ttl",
		`{"queue": ".hidden"}`: "queue",
	} {
		_, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.PMSweep, InitialData: []byte(input), Trigger: workflow.TriggerLocal})
		if contract.CodeOf(err) != contract.CodeValidationFailed || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want validation_failed naming %s", input, err, field)
		}
	}
	raw, err := contract.Validate(contract.PMSweep, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var in pmsweep.Input
	_ = json.Unmarshal(raw, &in)
	if in.Queue != pmsweep.QueueDefault || in.TTL != pmsweep.TTLDefault || in.Reclaimer != pmsweep.ReclaimerDefault || in.DryRun {
		t.Errorf("defaults = %+v", in)
	}
}

// A sweep handles at most MaxStale stale tasks and reads no further than one past them: the
// rest are counted (stale, deferred) and wait for the next sweep, which takes them.
func TestASweepStopsReadingAtMaxStaleAndCountsTheRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{MaxStale: 3, PageSize: 2}, nil)
	ctx := context.Background()
	e.claimed(5)
	e.Clock.Advance(301 * time.Second)
	if err := e.worker.Enqueue(ctx, e.queue, "fresh", "fresh", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.worker.Next(ctx, e.queue, "worker-fresh", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.Spy.Reset()
	o, stats, err := e.wf.RunOnce(ctx, pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "r"}, false, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if o.Scanned != 6 || o.Stale != 5 || len(o.Reclaimed) != 3 || !stats.Capped || stats.Deferred != 2 {
		t.Fatalf("capped sweep: scanned %d stale %d reclaimed %d capped %t deferred %d, want 6, 5, 3, true, 2",
			o.Scanned, o.Stale, len(o.Reclaimed), stats.Capped, stats.Deferred)
	}
	// Pages of 2: the scan stops on the first page holding a fourth stale task, having read 4
	// working tasks, never the fifth stale one or the fresh one.
	scanned := 0
	for _, name := range e.Spy.Reads() {
		if strings.Contains(name, "/"+ledger.TasksCollection+"/") && strings.Count(name[strings.Index(name, "/"+ledger.TasksCollection+"/"):], "/") == 2 {
			scanned++
		}
	}
	if scanned != 4+3 { // the scan's 4, and each reclaim's read of its task
		t.Errorf("the capped sweep read %d task documents, want 7 (4 scanned, 3 reclaimed)", scanned)
	}
	o, stats, err = e.wf.RunOnce(ctx, pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "r"}, false, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if o.Stale != 2 || len(o.Reclaimed) != 2 || stats.Capped || stats.Deferred != 0 {
		t.Errorf("the next sweep: stale %d reclaimed %d capped %t deferred %d, want 2, 2, false, 0", o.Stale, len(o.Reclaimed), stats.Capped, stats.Deferred)
	}
}

// Off the command line the TTL has a floor (pmsweep.TTLFloorDefault unless configured), as the
// runs sweep's deadline has: a scheduled or manual sweep below it is refused naming ttl and
// writes nothing; the command is not held to it.
func TestTheTTLHasAFloorOffTheCommandLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{TTLFloor: 120}, nil)
	e.claimed(1)
	e.Clock.Advance(90 * time.Second) // silent for 90 s: stale for a ttl of 60, not for the floor of 120
	raw := []byte(`{"queue": "` + e.queue + `", "ttl": 60}`)
	e.Spy.Reset()
	for _, trig := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual} {
		_, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: trig})
		if contract.CodeOf(err) != contract.CodeValidationFailed || !strings.Contains(err.Error(), "ttl") {
			t.Errorf("%s below the floor: err = %v, want validation_failed naming ttl", trig, err)
		}
	}
	sweeptest.NoWrites(t, e.Spy, "refused sweeps")
	if o := e.sweep(pmsweep.Input{TTL: 60}); len(o.Reclaimed) != 1 {
		t.Errorf("the command's sweep below the floor: %+v, want the silent task reclaimed", o)
	}
}

// A worker that reports progress between the sweep's scan and its transaction is alive: the
// report moves last_activity_at (not the heartbeat head), and the reclaim must see it and leave
// the task to its worker.
func TestAReportBetweenSnapshotAndReclaimWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, live := racedSweep(t, "the reporting worker", func(e *env, live *ledgertest.Lease) {
		if _, err := e.worker.Report(ctx, *live, "still at it", e.Clock.Now()); err != nil {
			t.Errorf("the live worker's report: %v", err)
		}
	})
	if err := e.worker.Complete(ctx, *live, e.Clock.Now()); err != nil {
		t.Errorf("the reporting worker cannot complete its task: %v", err)
	}
}

// Once a reclaimed task is claimed by a second worker, the first — a zombie still holding its
// old lease — can neither heartbeat, report, complete nor fail it: the task is working again,
// but on another heartbeat head. The second worker's claim is untouched and it completes.
func TestAZombieCanChangeNothingAfterItsTaskIsClaimedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	zombie := e.claimed(1)[0]
	e.Clock.Advance(10 * time.Minute)
	if o := e.sweep(pmsweep.Input{}); len(o.Reclaimed) != 1 {
		t.Fatalf("sweep: %+v", o)
	}
	second, err := e.worker.Next(ctx, e.queue, "second-worker", e.Clock.Now())
	if err != nil || second.TaskID != zombie.TaskID {
		t.Fatalf("the second worker's claim: %+v %v", second, err)
	}
	before := e.task(zombie.TaskID)
	e.zombieChangesNothing(zombie)
	if after := e.task(zombie.TaskID); after != before || after.WorkerID != "second-worker" || after.Status != ledger.TaskWorking {
		t.Errorf("the task changed under the second worker: %+v → %+v", before, after)
	}
	if err := e.worker.Complete(ctx, second, e.Clock.Now()); err != nil {
		t.Errorf("the second worker cannot complete: %v", err)
	}
}

// Working tasks a writer left without last_activity_at, or with a string or a number there, are
// counted and sampled by every sweep, and never reclaimed; the queue's other tasks are swept as
// usual.
func TestTasksNoScanCanSeeAreCountedAndLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	silent := e.claimed(1)[0]
	e.Clock.Advance(10 * time.Minute)
	var bad []string
	for i, v := range testenv.Unstamped {
		id := fmt.Sprintf("unstamped-%d", i)
		testenv.PutStamped(t, e.FS, ledger.TaskQueuesCollection+"/"+e.queue+"/"+ledger.TasksCollection+"/"+id, map[string]any{
			"slug": id, "status": ledger.TaskWorking, "worker_id": "w", "status_tip": "s", "heartbeat_tip": "h", "reclaim_count": int64(0),
		}, "last_activity_at", v)
		bad = append(bad, id)
	}
	raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "r"})
	out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal}, "sweep")
	o, s := testenv.DecodeRun[pmsweep.Output, pmsweep.Stats](t, out.Output, out.Stats)
	if s.Invisible == nil || s.Invisible.Count != 3 || !slices.Equal(s.Invisible.Sample, bad) {
		t.Errorf("stats.invisible = %+v, want the 3 tasks %v", s.Invisible, bad)
	}
	if len(o.Reclaimed) != 1 || o.Reclaimed[0].Task != silent.TaskID {
		t.Errorf("output = %+v, want the silent task reclaimed", o)
	}
	for _, id := range bad {
		testenv.Unchanged(t, e.FS, "invisible task", ledger.TaskQueuesCollection+"/"+e.queue+"/"+ledger.TasksCollection+"/"+id)
	}
}

// ReclaimTask's own contract: a task that is no longer working is not reclaimed, even when its
// heartbeat head and last activity are the ones the caller saw (a foreign writer that ended it
// without touching them).
func TestATaskNoLongerWorkingIsNotReclaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	l := e.claimed(1)[0]
	seen := e.task(l.TaskID)
	ref := e.FS.Collection(ledger.TaskQueuesCollection).Doc(e.queue).Collection(ledger.TasksCollection).Doc(l.TaskID)
	if _, err := ref.Update(ctx, []firestore.Update{{Path: "status", Value: ledger.TaskDone}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.tasks.ReclaimTask(ctx, e.queue, l.TaskID, "s", nil, e.Clock.Now().Add(time.Hour), pmsweep.Reclaimable(seen, 0))
	if err != nil || r.Reclaimed || r.Why != "not_working" {
		t.Errorf("reclaim of a done task: %+v %v, want not_working", r, err)
	}
	if got := e.task(l.TaskID); got.Status != ledger.TaskDone || got.HeartbeatTip != seen.HeartbeatTip {
		t.Errorf("the done task changed: %+v", got)
	}
}

// A worker's lease ends with its task: after it completes (or fails) the task, the same lease can
// neither heartbeat, report, nor end it again, though the task's heartbeat head is still the
// lease's.
func TestALeaseEndsWithItsTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, end := range []string{"complete", "fail"} {
		e := newEnv(t, pmsweep.Config{}, nil)
		l := e.claimed(1)[0]
		var err error
		if end == "complete" {
			err = e.worker.Complete(ctx, l, e.Clock.Now())
		} else {
			err = e.worker.Fail(ctx, l, "broke", e.Clock.Now())
		}
		if err != nil {
			t.Fatal(err)
		}
		before := e.task(l.TaskID)
		if _, err := e.worker.Heartbeat(ctx, l, e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
			t.Errorf("%s, then heartbeat: %v, want head moved", end, err)
		}
		if _, err := e.worker.Report(ctx, l, "more", e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
			t.Errorf("%s, then report: %v, want head moved", end, err)
		}
		if err := e.worker.Complete(ctx, l, e.Clock.Now()); !errors.Is(err, ledgertest.ErrHeadMoved) {
			t.Errorf("%s, then complete: %v, want head moved", end, err)
		}
		if after := e.task(l.TaskID); after != before {
			t.Errorf("%s, then the lease's writes changed the task: %+v → %+v", end, before, after)
		}
	}
}

// One task a foreign writer got wrong (reclaim_count a string) among stale ones, on a page
// boundary: the sweep names it, skips it, and reclaims the rest of the queue.
func TestOneMalformedTaskIsSkippedAndTheRestOfTheQueueIsSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{PageSize: 2}, nil)
	ctx := context.Background()
	e.claimed(4)
	if err := e.worker.Enqueue(ctx, e.queue, "task-new", "slug-new", e.Clock.Now()); err != nil { // counted, not read
		t.Fatal(err)
	}
	bad := e.FS.Collection(ledger.TaskQueuesCollection).Doc(e.queue).Collection(ledger.TasksCollection).Doc("task-001")
	if _, err := bad.Update(ctx, []firestore.Update{{Path: "reclaim_count", Value: "0"}}); err != nil {
		t.Fatal(err)
	}
	before, err := bad.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(400 * time.Second)
	raw, _ := json.Marshal(pmsweep.Input{Queue: e.queue, TTL: 300, Reclaimer: "r"})
	out, err := e.Engine.Start(ctx, workflow.Request{Type: contract.PMSweep, InitialData: raw, Trigger: workflow.TriggerLocal})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("sweep: %s %v %v", out.Status, out.Err, err)
	}
	var o pmsweep.Output
	testenv.Decode(t, out.Output, &o)
	var got []string
	for _, r := range o.Reclaimed {
		got = append(got, r.Task)
	}
	if !slices.Equal(got, []string{"task-000", "task-002", "task-003"}) {
		t.Errorf("reclaimed %v, want every stale task but the malformed one", got)
	}
	if o.Scanned != 5 || o.Stale != 3 {
		t.Errorf("scanned %d stale %d, want 5 (every task of the queue) and 3", o.Scanned, o.Stale)
	}
	var m ledger.Malformed
	testenv.Decode(t, out.Stats["malformed"], &m)
	if want := ledger.TaskQueuesCollection + "/" + e.queue + "/" + ledger.TasksCollection + "/task-001"; m.Count != 1 || !slices.Equal(m.Sample, []string{want}) {
		t.Errorf("stats.malformed = %+v, want 1: %s", m, want)
	}
	after, err := bad.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdateTime.Equal(before.UpdateTime) {
		t.Error("the malformed task was written")
	}
}
