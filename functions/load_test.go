package functions

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// The load: concurrent ticks over a fleet, each tick published twice (Cloud Scheduler may) and
// some pushed again, a fraction of the executor's calls failing, a few executions Cloud Run does
// not know, and some sync messages delivered again — all through the Pub/Sub emulator's push to
// the served functions (by way of the push recorder, which forwards each push unchanged),
// against the emulators.
//
// The executor's faults are Internal, on a seeded fraction of GetExecution calls (the package's
// fake draws from a fixed seed). Internal rather than Unavailable: the Cloud Run adapter retries
// Unavailable up to three times, so a 10% Unavailable rate fails about 0.1% of calls, while
// Internal is not retried — 10% of calls fail, and each failure is one SyncExecution answer of
// 500 (a sync that failed transiently asks for a redelivery), which is how they are counted.
// Which calls fail depends on the order the pushes arrive in, which no seed fixes. The unknown
// executions (NotFound, within the grace) leave their rows active with sync.unknown_since until
// the clean-up tick, when Cloud Run knows them again.
//
// Size: the emulator pushes at most two messages per subscription at once (the recorder
// measures it), so the 4,500 sweep messages of 45 tick deliveries over 100 organizations are
// the bulk of the time — about a minute on two cores, a little more under -race.

// loadConfig sizes one load.
type loadConfig struct {
	orgs, stalePerOrg int
	ticks             int     // distinct ticks, each published twice
	ticksAgain        int     // ticks pushed again (same message ids)
	errorRate         float64 // of GetExecution calls failing with Internal
	forgotten         int     // stale rows whose execution Cloud Run does not know during the load (NotFound)
	syncsAgain        int     // sync messages republished (new message ids), and as many pushed again (same ids)
}

func TestTwentyTicksPublishedTwiceOverAHundredOrganizationsSettleEveryStaleRowExactlyOnce(t *testing.T) {
	cfg := loadConfig{orgs: 100, stalePerOrg: 3, ticks: 20, ticksAgain: 5, errorRate: 0.10, forgotten: 5, syncsAgain: 20}
	l := startLoad(t, cfg)
	s := l.state(t)
	counts, problems := checkLoad(l.fleet, s)
	for _, p := range problems {
		t.Error(p)
	}
	// The rows whose executions Cloud Run forgot are unknown, within the grace: the only ones
	// left active, each with its reason.
	for id := range l.forgotten {
		if r := s.rows[id]; !r.Active || r.Sync.UnknownSince.IsZero() {
			t.Errorf("row %s, whose execution Cloud Run does not know: active=%t unknown_since=%v", id, r.Active, r.Sync.UnknownSince)
		}
	}
	if counts.pending != len(l.forgotten) {
		t.Errorf("%d stale rows left active with a reason, want the %d whose executions were unknown", counts.pending, len(l.forgotten))
	}
	calls, injected := l.calls, l.rec.summary("SyncExecution").Status[http.StatusInternalServerError]
	pushes := map[string]pushSummary{}
	for _, target := range []string{"Dispatch", "Sweep", "SyncExecution"} {
		pushes[target] = l.rec.summary(target)
	}
	duplicateSweeps := 0 // sweep messages naming a run another message had already named
	for _, n := range pushes["Sweep"].AckedRun {
		duplicateSweeps += n - 1
	}

	// A clean tick with the faults cleared settles whatever was left active with a reason.
	cleanup, settledByCleanup := l.cleanupTick(t)
	after, problems := checkLoad(l.fleet, l.state(t))
	for _, p := range problems {
		t.Errorf("after the clean-up tick: %s", p)
	}
	if after.pending > 0 || after.settled != len(l.fleet.stale) {
		t.Errorf("after the clean-up tick %d of %d stale rows are settled, %d still pending", after.settled, len(l.fleet.stale), after.pending)
	}

	t.Logf("load: %d ticks ×2 over %d organizations (%d stale rows, %d live), %d ticks pushed again, %.0f%% of GetExecution calls failing with Internal, %d executions unknown to Cloud Run, %d sync messages republished and %d pushed again",
		cfg.ticks, cfg.orgs, len(l.fleet.stale), len(l.fleet.live), cfg.ticksAgain, cfg.errorRate*100, cfg.forgotten, cfg.syncsAgain, cfg.syncsAgain)
	t.Logf("quiet after %s; pushes: Dispatch %s; Sweep %s; SyncExecution %s; the emulator had at most %d, %d and %d pushes under way at once",
		l.elapsed.Round(time.Millisecond), pushes["Dispatch"], pushes["Sweep"], pushes["SyncExecution"],
		l.rec.mostBusy("Dispatch"), l.rec.mostBusy("Sweep"), l.rec.mostBusy("SyncExecution"))
	t.Logf("runs recorded: %d completed, %d failed; %d skipped (their organization's guard was held); %d sweep messages were duplicates of a recorded run; rows settled %d, still active with a recorded reason %d; executor errors injected: %d of %d GetExecution calls (%d rows keep a sync.last_error)",
		counts.completed, counts.failed, counts.unseen, duplicateSweeps, counts.settled, counts.pending, injected, calls, counts.lastErrors)
	t.Logf("clean-up tick (faults cleared): quiet after %s, settled %d rows; %d of %d stale rows settled in all",
		cleanup.Round(time.Millisecond), settledByCleanup, after.settled, len(l.fleet.stale))
}

// TestTheLoadChecksCatchADoubleSettlementALostRowASettledLiveRowAndAMissingReceipt runs a small
// load, checks it passes, then doctors what it left — through the functions' own connection,
// where the spy must see it, and behind its back, where the state must show it — and every
// doctored row must be reported.
func TestTheLoadChecksCatchADoubleSettlementALostRowASettledLiveRowAndAMissingReceipt(t *testing.T) {
	l := startLoad(t, loadConfig{orgs: 3, stalePerOrg: 2, ticks: 1})
	s := l.state(t)
	if _, problems := checkLoad(l.fleet, s); len(problems) > 0 {
		t.Fatalf("an undoctored load fails the checks: %v", problems)
	}
	ctx := context.Background()
	a, err := deps.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stale := l.fleet.rows()
	stale = slices.DeleteFunc(stale, func(id string) bool { return l.fleet.live[id] })
	var live string
	for id := range l.fleet.live {
		live = id
	}
	rows := l.w.fs.Collection(ledger.ExecutionsCollection)
	// A second settlement, where the spy sees it.
	if _, err := a.Firestore.Collection(ledger.ExecutionsCollection).Doc(stale[0]).Update(ctx, []firestore.Update{{Path: "settlement.at", Value: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	// A settled row made active again, with no reason recorded.
	if _, err := rows.Doc(stale[1]).Update(ctx, []firestore.Update{
		{Path: "active", Value: true}, {Path: "status", Value: "running"}, {Path: "settlement", Value: firestore.Delete},
	}); err != nil {
		t.Fatal(err)
	}
	// A live row settled.
	if _, err := rows.Doc(live).Update(ctx, []firestore.Update{
		{Path: "active", Value: false}, {Path: "status", Value: "succeeded"}, {Path: "settlement", Value: map[string]any{"workflow_run_uuid": "x"}},
	}); err != nil {
		t.Fatal(err)
	}
	// A receipt gone.
	run := s.rows[stale[2]].Settlement.WorkflowRunUUID
	if _, err := l.w.fs.Collection(ledger.RunsCollection).Doc(run).Collection(ledger.SyncsCollection).Doc(stale[2]).Delete(ctx); err != nil {
		t.Fatal(err)
	}

	_, problems := checkLoad(l.fleet, l.state(t))
	report := strings.Join(problems, "\n")
	for _, want := range []string{
		"row " + stale[0] + ": settlement written 2 times",
		"row " + stale[1] + " lost",
		"live row " + live + " was settled",
		"row " + stale[2] + " settled by run " + run + ", but settle receipts are held by []",
		"run " + run + " started",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the checks missed a doctored state (%q); they reported:\n%s", want, report)
		}
	}
}

// loadRun is one load under way: its world, fleet, and the ticks it published.
type loadRun struct {
	cfg         loadConfig
	w           world
	rec         *pushRecorder
	ps          *pubsub.Client
	fleet       loadFleet
	mark        spyMark  // the spy's position before the first tick
	ticks       []string // message ids of every tick published
	republished int      // sync messages the test published again
	elapsed     time.Duration
	calls       int                         // GetExecution calls during the load
	forgotten   map[string]*runpb.Execution // row → its execution, which Cloud Run does not know during the load
}

// startLoad seeds a fleet, runs cfg's load through the pipeline and waits until it is quiet.
func startLoad(t *testing.T, cfg loadConfig) *loadRun {
	t.Helper()
	ctx := context.Background()
	l := &loadRun{cfg: cfg, w: newFleetWorld(t), rec: watchPushes(t)}
	var err error
	if l.fleet, err = seedLoadFleet(ctx, l.w.fs, cfg.orgs, cfg.stalePerOrg); err != nil {
		t.Fatalf("seed the fleet: %v", err)
	}
	if l.ps, err = pubsub.NewClient(ctx, project); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.ps.Close() })

	l.forgotten = map[string]*runpb.Execution{}
	for _, id := range l.fleet.rows() {
		if len(l.forgotten) == cfg.forgotten {
			break
		}
		name := cloudrunfake.ExecutionName("p", "l", "job", id)
		if e, ok := fake.Execution(name); ok && !l.fleet.live[id] {
			l.forgotten[id] = e
			fake.RemoveExecution(name)
		}
	}

	l.mark = markSpy()
	calls := fake.Calls(cloudrunfake.GetExecution)
	if cfg.errorRate > 0 {
		fake.FailRate(cloudrunfake.GetExecution, codes.Internal, cfg.errorRate)
	}
	t.Cleanup(fake.ClearFaults)
	began := time.Now()
	l.ticks = publishAll(t, l.ps, pipeline.TicksDefault, repeat(loadTick, 2*cfg.ticks), map[string]string{message.AttrTrigger: "schedule"})
	if cfg.ticksAgain > 0 {
		deliverTicksAgain(t, l.rec, cfg.ticksAgain)
	}
	if cfg.syncsAgain > 0 {
		l.republished = deliverSyncsAgain(t, l.ps, l.rec, cfg.syncsAgain)
	}
	awaitLoadQuiet(t, l.w, l.rec, cfg.orgs, len(l.ticks), l.republished, 6*time.Minute)
	l.elapsed = time.Since(began)
	l.calls = fake.Calls(cloudrunfake.GetExecution) - calls
	return l
}

const loadTick = `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"min_age_seconds": 60, "limit": 25}}`

// state reads what the load has left so far.
func (l *loadRun) state(t *testing.T) loadState {
	t.Helper()
	s, err := gatherLoad(context.Background(), l.w.fs, l.fleet, l.mark, l.ticks)
	if err != nil {
		t.Fatalf("read what the load left: %v", err)
	}
	return s
}

// cleanupTick clears the faults (Cloud Run knows every execution again), publishes one more
// tick, waits until it is handled, and returns how long that took and how many rows its runs
// settled.
func (l *loadRun) cleanupTick(t *testing.T) (time.Duration, int) {
	t.Helper()
	fake.ClearFaults()
	for _, e := range l.forgotten {
		if err := fake.SetExecution(e); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	ids := publishAll(t, l.ps, pipeline.TicksDefault, []string{loadTick}, map[string]string{message.AttrTrigger: "schedule"})
	l.ticks = append(l.ticks, ids...)
	awaitLoadQuiet(t, l.w, l.rec, l.cfg.orgs, len(l.ticks), l.republished, 2*time.Minute)
	elapsed := time.Since(began)
	runs := map[string]bool{}
	for _, org := range l.fleet.orgs {
		runs[pipeline.RunUUID(ids[0], contract.ExecutionSyncCloudRun, org)] = true
	}
	settled := 0
	for id, r := range l.state(t).rows {
		if r.Settlement != nil && runs[r.Settlement.WorkflowRunUUID] && !l.fleet.live[id] {
			settled++
		}
	}
	return elapsed, settled
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// publishAll publishes every datum to topic at once and returns the message ids.
func publishAll(t *testing.T, ps *pubsub.Client, topic string, data []string, attrs map[string]string) []string {
	t.Helper()
	ctx := context.Background()
	pub := ps.Publisher(topic)
	defer pub.Stop()
	results := make([]*pubsub.PublishResult, len(data))
	for i, d := range data {
		results[i] = pub.Publish(ctx, &pubsub.Message{Data: []byte(d), Attributes: attrs})
	}
	ids := make([]string, len(data))
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("publish to %s: %v", topic, err)
		}
		ids[i] = id
	}
	return ids
}

// deliverSyncsAgain waits for the first 2n sync messages to be acknowledged, then publishes the
// first n again (new message ids, as a replay would) and pushes the next n again through the
// recorder (same message ids, as a redelivery would), while the load goes on. It returns how
// many messages it published.
func deliverSyncsAgain(t *testing.T, ps *pubsub.Client, rec *pushRecorder, n int) int {
	t.Helper()
	await(t, 3*time.Minute, fmt.Sprintf("%d sync messages to be acknowledged", 2*n), func() (bool, string) {
		got := len(rec.pushes("SyncExecution"))
		return got >= 2*n, fmt.Sprintf("%d acknowledged", got)
	})
	first := rec.pushes("SyncExecution")[:2*n]
	ctx := context.Background()
	pub := ps.Publisher(pipeline.SyncsDefault)
	defer pub.Stop()
	var results []*pubsub.PublishResult
	for _, p := range first[:n] {
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: p.Data, Attributes: p.Attrs}))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatalf("republish a sync message: %v", err)
		}
	}
	pushAgain(t, rec, "SyncExecution", first[n:])
	return n
}

// deliverTicksAgain waits for the first n ticks to be acknowledged and pushes them again
// through the recorder, same message ids: a redelivery, which names the same runs.
func deliverTicksAgain(t *testing.T, rec *pushRecorder, n int) {
	t.Helper()
	await(t, time.Minute, fmt.Sprintf("%d ticks to be acknowledged", n), func() (bool, string) {
		got := len(rec.pushes("Dispatch"))
		return got >= n, fmt.Sprintf("%d acknowledged", got)
	})
	pushAgain(t, rec, "Dispatch", rec.pushes("Dispatch")[:n])
}

// pushAgain pushes acknowledged pushes to target again, at once, through the recorder.
func pushAgain(t *testing.T, rec *pushRecorder, target string, pushes []recordedPush) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(pushes))
	for i, p := range pushes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, rec.url+"/"+target, bytes.NewReader(p.Body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header = http.Header{"Content-Type": {"application/json"}, testPushHeader: {"again"}}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("push a message to %s again: %v", target, err)
		}
	}
}

// awaitLoadQuiet waits until nothing the ticks caused is outstanding: every tick acknowledged,
// every sweep message those acknowledgements published (one per organization each) acknowledged,
// every run record terminal, every sync message the runs published (and the test republished)
// acknowledged, and no push in flight.
func awaitLoadQuiet(t *testing.T, w world, rec *pushRecorder, orgs, ticks, republished int, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	await(t, timeout, "the load to be handled", func() (bool, string) {
		dispatch, sweep, syncs := rec.summary("Dispatch"), rec.summary("Sweep"), rec.summary("SyncExecution")
		sweeps := rec.published() // each Dispatch delivery published one per organization with stale rows
		progress := fmt.Sprintf("ticks acknowledged %d of %d; sweep messages acknowledged %d of %d; sync messages acknowledged %d; %d pushes in flight",
			dispatch.Acked, ticks, sweep.Acked, sweeps, syncs.Acked, rec.busy())
		if dispatch.Acked < ticks || sweep.Acked < sweeps || rec.busy() > 0 {
			return false, progress
		}
		snaps, err := w.fs.Collection(ledger.RunsCollection).Select("status", "stats.published").Documents(ctx).GetAll()
		if err != nil {
			return false, progress + "; " + err.Error()
		}
		published, open := republished, 0
		for _, s := range snaps {
			if st, _ := s.Data()["status"].(string); st != "completed" && st != "failed" {
				open++
			}
			if n, err := s.DataAt("stats.published"); err == nil {
				published += int(asInt(n))
			}
		}
		progress += fmt.Sprintf(" of %d published; %d of %d run records not terminal", published, open, len(snaps))
		return open == 0 && syncs.Acked >= published && rec.busy() == 0, progress
	})
}
