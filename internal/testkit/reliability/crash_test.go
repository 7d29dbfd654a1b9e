package reliability_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/workflow"
)

// A failing trial is replayed with
//
//	go test ./internal/testkit/reliability -run TestCancelled -args -crash.seed=SEED -crash.trial=N -crash.workflow=NAME
//
// The seed fixes where each trial cuts its run; the order in which a run's pool takes its rows,
// and how far a deadline lets it get, are the machine's.
var (
	crashSeed     = flag.Uint64("crash.seed", 20261129, "seed of the crash trials")
	crashTrials   = flag.Int("crash.trials", 100, "crash trials per workflow")
	crashTrial    = flag.Int("crash.trial", -1, "run only this crash trial (to replay a failure)")
	crashWorkflow = flag.String("crash.workflow", "", "run only this workflow's crash trials (cloud-run, kubernetes, runs-sweep, pm-sweep, lease-settle)")
)

// deadlineShare is the share of trials cut by a deadline rather than at a call.
const deadlineShare = 4 // one in four

// crashTally is what one workflow's trials did, for the log.
type crashTally struct {
	trials, atCall, byDeadline, refused int
	before, while, after                int // where the cut fell: rows the first run settled, none/some/all
	completed, failed                   int // the first run's record
	rowsChecked, minN, maxN             int
}

// The workflows' trials run side by side, one goroutine each, held in lockstep: at the end of
// each phase every workflow's run has returned, and the goroutine check runs while nothing else
// is in flight. Not parallel with other tests, for the same reason.
func TestCancelledRunsLeaveNoTornRowNoOpenRecordNoGoroutineAndTheNextRunSettlesTheRest(t *testing.T) {
	t.Logf("crash seed %d, %d trials per workflow", *crashSeed, *crashTrials)
	ls := newLockstep(t)
	var members []member
	var rigs []*rig
	for _, c := range []struct {
		name  string
		build func(*testing.T) *rig
	}{
		{"cloud-run", cloudRunRig},
		{"kubernetes", kubernetesRig},
		{"runs-sweep", runsSweepRig},
		{"pm-sweep", pmSweepRig},
		{"lease-settle", leaseSettleRig},
	} {
		if *crashWorkflow != "" && c.name != *crashWorkflow {
			continue
		}
		r := c.build(t)
		r.warm(t)
		members, rigs = append(members, member{t: t, name: c.name}), append(rigs, r)
		ls.join() // all before any starts: the first barrier must wait for every one
	}
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			defer ls.leave()
			crashTrialsOf(m, rigs[i], ls)
		})
	}
	wg.Wait()
	t.Logf("%d goroutine checks, each once every workflow's runs of a phase had returned", ls.checks)
}

func crashTrialsOf(t member, r *rig, ls *lockstep) {
	ls.await(ls.takeBaseline) // every rig built and warmed: their goroutines are the baseline
	n, took := calibrate(t, r, ls)
	tally := crashTally{}
	for trial := range *crashTrials {
		if *crashTrial >= 0 && trial != *crashTrial {
			continue
		}
		rng := rand.New(rand.NewPCG(*crashSeed, uint64(trial)))
		crashTrialOnce(t, r, trial, cutFor(rng, n, took), n, &tally, ls)
	}
	t.Logf("%d trials (%d cut at a call, %d by a deadline; %d refused before their record); "+
		"the cut fell before any row was settled in %d, while settling in %d, after every row was settled in %d; "+
		"first runs ended completed %d, failed %d; %d rows judged; uncancelled second runs made %d..%d calls",
		tally.trials, tally.atCall, tally.byDeadline, tally.refused, tally.before, tally.while, tally.after,
		tally.completed, tally.failed, tally.rowsChecked, tally.minN, tally.maxN)
	if tally.trials > 0 && tally.trials == *crashTrials && tally.before+tally.while == 0 {
		t.Errorf("no trial cut its run before it had settled everything: the trials test nothing")
	}
}

// calibrate runs the trial's shape uncancelled: it gives N, the calls a trial cuts among, and
// how long a run takes, the range of the deadlines; and it shows that such a run makes every
// row's change.
func calibrate(t member, r *rig, ls *lockstep) (n int, took time.Duration) {
	cal := r.seed(t, -1)
	before := r.read(t, cal, true)
	calUUID := uuid.NewString()
	r.trip.arm(0, nil)
	began := time.Now()
	out, err := r.start(context.Background(), calUUID, cal.input)
	took = time.Since(began)
	n, _ = r.trip.disarm()
	ls.await(ls.checkLeaks("the calibration runs (seed %d)", *crashSeed))
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("the uncancelled calibration run: %v %v", err, out.Err)
	}
	for i, s := range r.read(t, cal, true) {
		row := cal.rows[i]
		want := untouched
		if row.change != nil {
			want = changed
		}
		if got, diffs := judge(before[i], s, change0(row, calUUID)); got != want {
			t.Errorf("the uncancelled run left row %s %s, want %s: %v", row.name, got, want, diffs)
		}
	}
	t.Logf("an uncancelled run of %d rows makes N = %d calls in %s", len(cal.rows), n, took)
	return n, took
}

func change0(row seededRow, runUUID string) *change {
	if row.change == nil {
		return nil
	}
	return row.change(runUUID)
}

// cut is where a trial cuts its first run: at the k-th call, or by a deadline.
type cut struct {
	k        int           // 1..N; 0 for a deadline
	deadline time.Duration // for k == 0
}

// cutFor draws a trial's cut: one in deadlineShare by a deadline within the time an uncancelled
// run takes, the rest at a call in [1, n].
func cutFor(rng *rand.Rand, n int, took time.Duration) cut {
	if rng.IntN(deadlineShare) == 0 {
		return cut{deadline: time.Duration(rng.Int64N(int64(took) + 1))}
	}
	return cut{k: 1 + rng.IntN(n)}
}

func (c cut) context() (context.Context, context.CancelFunc) {
	if c.k == 0 {
		return context.WithTimeout(context.Background(), c.deadline)
	}
	return context.WithCancel(context.Background())
}

func crashTrialOnce(t member, r *rig, trial int, c cut, n int, tally *crashTally, ls *lockstep) {
	tr := r.seed(t, trial)
	before := r.read(t, tr, false)
	tally.trials++
	label := fmt.Sprintf("trial %d (seed %d; replay with -crash.seed=%d -crash.trial=%d -crash.workflow=%s)", trial, *crashSeed, *crashSeed, trial, t.name)

	// The cut run.
	run1 := uuid.NewString()
	ctx, cancel := c.context()
	r.spy.Reset()
	r.trip.arm(c.k, cancel)
	out1, err1 := r.start(ctx, run1, tr.input)
	calls, fired := r.trip.disarm()
	cancel()
	if c.k > 0 {
		tally.atCall++
		label += fmt.Sprintf(", cancelled as call %d of N = %d started (%s; the run made %d)", c.k, n, fired, calls)
	} else {
		tally.byDeadline++
		label += fmt.Sprintf(", deadline %s (the run made %d calls)", c.deadline, calls)
	}
	ls.await(ls.checkLeaks("crash trial %d (seed %d), once every workflow's first run returned", trial, *crashSeed))
	writes1 := r.settleWrites()
	for _, p := range r.checkRecord(run1, tr.input, err1) {
		t.Errorf("%s: first run: %s", label, p)
	}
	switch {
	case err1 != nil:
		tally.refused++
	case out1.Status == workflow.StateCompleted:
		tally.completed++
	default:
		tally.failed++
	}
	after1 := r.read(t, tr, false)
	first := make([]string, len(tr.rows))
	settledFirst, settleable := 0, 0
	for i, row := range tr.rows {
		tally.rowsChecked++
		var diffs []string
		first[i], diffs = judge(before[i], after1[i], change0(row, run1))
		if first[i] == torn {
			t.Errorf("%s: row %s is torn after the cut run: %v", label, row.name, diffs)
		}
		if row.settles {
			settleable++
			if first[i] == changed {
				settledFirst++
			}
		}
	}
	switch settledFirst {
	case 0:
		tally.before++
	case settleable:
		tally.after++
	default:
		tally.while++
	}

	// The next run, uncancelled, settles the rest.
	run2 := uuid.NewString()
	r.spy.Reset()
	r.trip.arm(0, nil)
	out2, err2 := r.start(context.Background(), run2, tr.input)
	calls2, _ := r.trip.disarm()
	ls.await(ls.checkLeaks("crash trial %d (seed %d), once every workflow's second run returned", trial, *crashSeed))
	if err2 != nil || out2.Status != workflow.StateCompleted {
		t.Errorf("%s: the second, uncancelled run did not complete: %v %v", label, err2, out2.Err)
	}
	tally.minN, tally.maxN = minPositive(tally.minN, calls2), max(tally.maxN, calls2)
	for _, p := range r.checkRecord(run2, tr.input, err2) {
		t.Errorf("%s: second run: %s", label, p)
	}
	writes2 := r.settleWrites()
	after2 := r.read(t, tr, true)
	for i, row := range tr.rows {
		tally.rowsChecked++
		for _, p := range afterSecondRun(row, first[i], before[i], after1[i], after2[i], run2, writes1[row.doc], writes2[row.doc]) {
			t.Errorf("%s: row %s: %s", label, row.name, p)
		}
	}
}

// afterSecondRun says what is wrong with a row once the uncancelled run has followed the cut
// one: the second run makes the change the first did not make (or makes again one that leaves
// the row stale), leaves alone what the first changed, and a settlement is written once in all —
// w1 and w2 are the settling writes the spy saw in each run. (A commit cut off by a deadline after
// it landed is not seen by the spy, but then the row names the first run and the second left it
// alone, which the comparison of the row's states shows.)
func afterSecondRun(row seededRow, first string, before, after1, after2 state, run2 string, w1, w2 int) []string {
	var out []string
	switch {
	case first == changed && row.again != nil:
		if got, diffs := judge(after1, after2, row.again(run2)); got != changed {
			out = append(out, fmt.Sprintf("changed by the first run, it is %s after the second, want the change made again: %v", got, diffs))
		}
	case first == changed:
		if diffs := compare(after1, after2, nil); len(diffs) > 0 {
			out = append(out, fmt.Sprintf("changed by the first run, it was changed again by the second: %v", diffs))
		}
	case row.change == nil:
		if got, diffs := judge(before, after2, nil); got != untouched {
			out = append(out, fmt.Sprintf("it must stay as seeded, yet: %v", diffs))
		}
	default:
		if got, diffs := judge(before, after2, row.change(run2)); got != changed {
			out = append(out, fmt.Sprintf("it is %s after the second run, want the complete change: %v", got, diffs))
		}
	}
	if !row.settles {
		return out
	}
	switch {
	case w1+w2 > 1:
		out = append(out, fmt.Sprintf("settled %d times (first run %d, second %d), want once", w1+w2, w1, w2))
	case first != changed && w2 != 1:
		out = append(out, fmt.Sprintf("left by the first run, it was settled %d times by the second, want once", w2))
	}
	return out
}

func minPositive(a, b int) int {
	if a == 0 || b < a {
		return b
	}
	return a
}
