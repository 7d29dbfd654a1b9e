package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// At-least-once delivery: every message type, delivered 2 or 5 times — one copy after the other,
// or all at once shuffled among the other messages of its scope — must end in the state one
// delivery gives. The copies are POSTed as real push bodies to the served targets (raw, as the
// emulator pushes, and every other copy as Eventarc's binary CloudEvent), so ordering and
// duplication are exactly the test's; what the targets publish (Dispatch's sweep messages,
// Sweep's sync messages) the emulator pushes, as in production.
//
// A scope's other messages (delivery_scopes_test.go), each delivered once: for a tick or an
// execution-sync sweep, a late sync message of an earlier run for a row the new run's scan does
// not see; for a sweep message, the tick it came from, delivered again (Dispatch publishes the
// same run's message once more); for a sync message, its run's sync messages for other rows.
//
// The end state is compared with a baseline scope that got every message once (observe: each
// document projected to what must not depend on delivery, by role, with the functions' writes to
// it as the spy counted them), and held to the invariants: no second settlement, one terminal
// record per run, receipts once per (run, row), and counts that add up to what was settled.
//
// runner.execution-sync-stale-kubernetes is not among the types: the test world configures no
// cluster (STALESWEEP_KUBE_CLUSTERS is unset), so its syncs could only fail ("cluster not
// configured") and settle nothing.

// messageType is one kind of message and the scope it is delivered to.
type messageType struct {
	name string
	seed scopeSeeder
}

var messageTypes = []messageType{
	{"tick to Dispatch", tickScope},
	{"sweep of runner.execution-sync-stale-cloud-run", executionSweepScope},
	{"sweep of platform.extension.runs.sweep", runsSweepScope},
	{"sweep of pm.sweep", pmSweepScope},
	{"sweep of runner.workspace-lease-settle", leaseSettleScope},
	{"sync to SyncExecution", syncScope},
}

// deliveryMode is how the copies of a message arrive.
type deliveryMode string

const (
	oneAfterAnother deliveryMode = "in order"
	allAtOnce       deliveryMode = "interleaved"
)

func TestEveryMessageDeliveredTwiceOrFiveTimesEndsAsIfDeliveredOnce(t *testing.T) {
	w := newWorld(t)
	rec := watchPushes(t)
	for _, mt := range messageTypes {
		_, baseline, _ := deliverToScope(t, w, rec, mt, 1, oneAfterAnother)
		for _, p := range baseline.problems {
			t.Errorf("%s delivered once: %s", mt.name, p)
		}
		for _, copies := range []int{2, 5} {
			for _, mode := range []deliveryMode{oneAfterAnother, allAtOnce} {
				t.Run(fmt.Sprintf("%s ×%d %s", mt.name, copies, mode), func(t *testing.T) {
					_, got, _ := deliverToScope(t, w, rec, mt, copies, mode)
					for _, p := range got.problems {
						t.Error(p)
					}
					for _, d := range diff(baseline.fields, got.fields) {
						t.Errorf("not as after one delivery: %s", d)
					}
				})
			}
		}
	}
}

// TestTheDeliveryChecksCatchADoubleSettlementADivergentRowAndAnUnaskedRun shows the checks above
// failing: after a clean single delivery it doctors the scope — a second settlement written
// through the functions' own connection, a row's outcome changed, a run record nobody asked for —
// and each must be reported.
func TestTheDeliveryChecksCatchADoubleSettlementADivergentRowAndAnUnaskedRun(t *testing.T) {
	w := newWorld(t)
	rec := watchPushes(t)
	mt := messageType{"sweep of runner.execution-sync-stale-cloud-run", executionSweepScope}
	_, baseline, _ := deliverToScope(t, w, rec, mt, 1, oneAfterAnother)
	sc, clean, from := deliverToScope(t, w, rec, mt, 1, oneAfterAnother)
	if len(clean.problems) > 0 || len(diff(baseline.fields, clean.fields)) > 0 {
		t.Fatalf("an undoctored scope fails the checks: %v %v", clean.problems, diff(baseline.fields, clean.fields))
	}

	ctx := context.Background()
	a, err := deps.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := func(role string) string {
		for _, d := range sc.docs {
			if d.role == role {
				return d.path
			}
		}
		t.Fatalf("no document plays %s", role)
		return ""
	}
	if _, err := a.Firestore.Doc(path("stale-failed")).Update(ctx, []firestore.Update{{Path: "settlement.at", Value: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.fs.Doc(path("stale-succeeded-1")).Update(ctx, []firestore.Update{{Path: "outcome", Value: "failed"}}); err != nil {
		t.Fatal(err)
	}
	var start struct {
		InitialData map[string]any `json:"initial_data"`
	}
	_ = json.Unmarshal(sc.primary.data, &start)
	if _, err := w.fs.Collection(ledger.RunsCollection).Doc(uuid.NewString()).Set(ctx, map[string]any{
		"status": "reconciling", "initial_data": start.InitialData, "initiated_at": time.Now(),
	}); err != nil {
		t.Fatal(err)
	}

	doctored, err := observe(ctx, w.fs, sc, from.since, from.mark)
	if err != nil {
		t.Fatal(err)
	}
	report := strings.Join(append(doctored.problems, diff(baseline.fields, doctored.fields)...), "\n")
	for _, want := range []string{
		"stale-failed (" + path("stale-failed") + "): settlement written 2 times",
		"writes:stale-failed: 2, want 1",
		"stale-succeeded-1.outcome: failed, want succeeded",
		"started by no message delivered to it",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the checks missed a doctored state (%q); they reported:\n%s", want, report)
		}
	}
}

// deliverToScope seeds mt's scope, delivers its message `copies` times and its companions once
// in mode, waits until nothing it caused is outstanding, and observes the scope.
func deliverToScope(t *testing.T, w world, rec *pushRecorder, mt messageType, copies int, mode deliveryMode) (*scope, observation, observedFrom) {
	t.Helper()
	since, mark := time.Now(), markSpy()
	dispatched := dispatchedSoFar(rec)
	sc := mt.seed(t, w)
	type delivery struct {
		msg    pubsubMessage
		binary bool
	}
	var ds []delivery
	for i := range copies {
		ds = append(ds, delivery{sc.primary, i%2 == 1}) // every other copy as Eventarc sends it
	}
	for _, c := range sc.companions {
		ds = append(ds, delivery{c, false})
	}
	ctx := context.Background()
	answers := make([][]int, len(ds))
	switch mode {
	case oneAfterAnother:
		for i, d := range ds {
			var err error
			if answers[i], err = deliverUntilAcknowledged(ctx, d.msg, d.binary); err != nil {
				t.Fatal(err)
			}
		}
	case allAtOnce:
		h := fnv.New64a()
		_, _ = io.WriteString(h, fmt.Sprint(mt.name, copies))
		rng := rand.New(rand.NewPCG(h.Sum64(), 1))
		rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		errs := make([]error, len(ds))
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		for i, d := range ds {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-gate
				answers[i], errs[i] = deliverUntilAcknowledged(ctx, d.msg, d.binary)
			}()
		}
		ready.Wait()
		close(gate) // every delivery is in its goroutine: let them go at once
		done.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	awaitScopeQuiet(t, w, rec, sc, copies, dispatched)
	obs, err := observe(ctx, w.fs, sc, since, mark)
	if err != nil {
		t.Fatal(err)
	}
	redelivered := 0
	for _, a := range answers {
		redelivered += len(a) - 1
	}
	run := sc.runs["primary"]
	t.Logf("%s ×%d %s: %d deliveries POSTed (%d of them again after a 5xx), the emulator pushed %d sweep and %d sync messages of the run; %d invariants broken",
		mt.name, copies, mode, len(ds)+redelivered, redelivered, rec.ackedFor("Sweep", run), rec.ackedFor("SyncExecution", run), len(obs.problems))
	return sc, obs, observedFrom{since, mark}
}

// observedFrom is where a scope's observation starts: the time it was seeded and the spy's mark.
type observedFrom struct {
	since time.Time
	mark  spyMark
}

// awaitScopeQuiet waits until the scope's primary run has ended and every message it caused
// has been pushed and acknowledged: its sweep messages (as many as the scope's Dispatch
// deliveries said they published, when the scope's pushedSweeps is nil: one by a delivery that
// found the scope's stale rows, none by one that found them settled) and the sync messages it
// published. dispatched is dispatchedSoFar before the scope was seeded.
func awaitScopeQuiet(t *testing.T, w world, rec *pushRecorder, sc *scope, copies, dispatched int) {
	t.Helper()
	run := sc.runs["primary"]
	runs := runstore.New(w.fs)
	await(t, 90*time.Second, "the scope's messages to be handled", func() (bool, string) {
		if !sc.recorded {
			return rec.busy() == 0, fmt.Sprintf("%d pushes in flight", rec.busy())
		}
		r, err := runs.GetRun(context.Background(), run)
		published, _ := r.Stats["published"].(int64)
		sweeps, syncs, busy := rec.ackedFor("Sweep", run), rec.ackedFor("SyncExecution", run), rec.busy()
		ended := err == nil && (r.Status == "completed" || r.Status == "failed")
		want := dispatchedSoFar(rec) - dispatched
		if sc.pushedSweeps != nil {
			want = sc.pushedSweeps(copies)
		}
		progress := fmt.Sprintf("run %s %q (%v); sweep messages acknowledged %d of %d; sync messages acknowledged %d of %d; %d pushes in flight",
			run, r.Status, err, sweeps, want, syncs, published, busy)
		return ended && sweeps >= want && syncs >= int(published) && busy == 0, progress
	})
}

// testDispatched counts the sweep messages the Dispatch deliveries the tests POST themselves
// said they published.
var testDispatched atomic.Int64

// dispatchedSoFar is how many sweep messages every Dispatch delivery so far said it published,
// the tests' own and the emulator's.
func dispatchedSoFar(rec *pushRecorder) int { return int(testDispatched.Load()) + rec.published() }

// deliverUntilAcknowledged POSTs m to its target as a push subscription would — a raw push
// body, or Eventarc's binary CloudEvent — and delivers it again after an answer asking for a
// redelivery (5xx), up to a bound. It returns every answer.
func deliverUntilAcknowledged(ctx context.Context, m pubsubMessage, binary bool) ([]int, error) {
	body := pushBody(m.data, m.attrs, m.id)
	header := http.Header{"Content-Type": {"application/json"}}
	if binary {
		body, header = []byte(cloudEventData(body)), ceHeaders(m.id)
	}
	var answers []int
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/"+m.target, bytes.NewReader(body))
		if err != nil {
			return answers, err
		}
		req.Header = header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answers, fmt.Errorf("deliver %s to %s: %w", m.id, m.target, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answers = append(answers, resp.StatusCode)
		if n, err := strconv.Atoi(resp.Header.Get(HeaderPublished)); err == nil {
			testDispatched.Add(int64(n))
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			return answers, nil
		case resp.StatusCode < 500:
			return answers, fmt.Errorf("deliver %s to %s: answered %v, want 200 or a redelivery", m.id, m.target, answers)
		}
	}
	return answers, fmt.Errorf("deliver %s to %s: answered %v, never acknowledged", m.id, m.target, answers)
}
