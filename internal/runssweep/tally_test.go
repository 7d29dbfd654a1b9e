package runssweep_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

// tally is what a run decided, in a form a table can state.
type tally struct {
	swept                    []string // ids, sorted
	scanned                  int
	moved, errored, deferred int
	released, heldByOther    int
	outOfBu                  bool
	sweeptest.Steps
}

// The decision and tally logic of one sweep, against the in-memory store (both tiers): which
// runs are abandoned and which left, and how each is counted.
func TestSweepDecidesAndCountsEachRun(t *testing.T) {
	now := epoch
	idle := now.Add(-time.Hour)
	// run puts a running run that last moved `at`.
	run := func(s *memstore.ExtensionRuns, id string, at time.Time, background bool) {
		s.Put(ledger.ExtensionRun{RunID: id, TenantID: "tn", ExtensionID: "ext-" + id, JobName: "job-" + id, Background: background,
			Status: ledger.ExtensionRunning, StartedAt: at, LastMovedAt: at})
	}
	// quiet gives the fleet enough live runs that the storm guard stays out of the way.
	quiet := func(s *memstore.ExtensionRuns, n int) {
		for i := range n {
			run(s, fmt.Sprintf("live-%02d", i), now, false)
		}
	}
	// idleFleet has most of the fleet idle: eleven idle runs beside ten live ones.
	idleFleet := func(s *memstore.ExtensionRuns, _ func()) {
		for i := range 11 {
			run(s, fmt.Sprintf("r%02d", i), idle, false)
		}
		quiet(s, 10)
	}
	for _, c := range []struct {
		name     string
		in       runssweep.Input
		override bool
		seed     func(s *memstore.ExtensionRuns, cancel func())
		want     tally
	}{
		{
			name: "idle runs are abandoned, fresh ones are not read",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				run(s, "b", now.Add(-61*time.Second), false)
				run(s, "c", now.Add(-59*time.Second), false) // within the deadline
				s.Put(ledger.ExtensionRun{RunID: "done", Status: ledger.ExtensionSucceeded, LastMovedAt: idle})
				quiet(s, 20)
			},
			want: tally{swept: []string{"a", "b"}, scanned: 2, Steps: sweeptest.Steps{Aged: 2, Live: 23}},
		},
		{
			name: "interlocks: released when they name the run, left and counted when another holds them",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "own", idle, true)
				s.PutInterlock("tn", "ext-own", "own")
				run(s, "other", idle, true)
				s.PutInterlock("tn", "ext-other", "someone-else")
				run(s, "none", idle, true)
				quiet(s, 20)
			},
			want: tally{swept: []string{"none", "other", "own"}, scanned: 3, released: 1, heldByOther: 1, Steps: sweeptest.Steps{Aged: 3, Live: 23}},
		},
		{
			name: "malformed runs are counted and skipped; invisible ones are reported and count as running",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				s.Put(ledger.ExtensionRun{RunID: "bad", Status: ledger.ExtensionRunning, LastMovedAt: idle.Add(-time.Hour), Malformed: "background: not a bool"})
				s.PutInvisible("inv-1")
				s.PutInvisible("inv-2")
				quiet(s, 20)
			},
			want: tally{swept: []string{"a"}, scanned: 2, Steps: sweeptest.Steps{Malformed: 1, Invisible: 2, Aged: 1, Live: 24}},
		},
		{
			name: "a run that moved after the scan is left and counted as moved",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				run(s, "alive", idle, false)
				quiet(s, 20)
				s.Before = func(id string) {
					if id == "alive" {
						s.Move(id, now)
					}
				}
			},
			want: tally{swept: []string{"a"}, scanned: 2, moved: 1, Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "a failed transaction is counted; the others go ahead",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				run(s, "b", idle, false)
				quiet(s, 20)
				s.Fail = func(op, id string) error {
					if op == "Abandon" && id == "b" {
						return errors.New("aborted")
					}
					return nil
				}
			},
			want: tally{swept: []string{"a"}, scanned: 2, errored: 1, Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "every transaction failed: the run fails",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				quiet(s, 20)
				s.Fail = func(op, _ string) error {
					if op == "Abandon" {
						return errors.New("aborted")
					}
					return nil
				}
			},
			want: tally{scanned: 1, errored: 1, Steps: sweeptest.Steps{Aged: 1, Live: 21, Failed: "abandon_failed"}},
		},
		{
			name: "the limit bounds the abandoned; the guard counts every idle run",
			in:   runssweep.Input{Limit: 2, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				for i := range 5 {
					run(s, fmt.Sprintf("r%d", i), idle.Add(time.Duration(i)*time.Second), false)
				}
				quiet(s, 20)
			},
			want: tally{swept: []string{"r0", "r1"}, scanned: 2, Steps: sweeptest.Steps{Aged: 5, Live: 25}},
		},
		{
			name: "runs read idle that move before the count still count for the guard",
			in:   runssweep.Input{Limit: 2, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				run(s, "a", idle, false)
				run(s, "b", idle, false)
				quiet(s, 20)
				s.Fail = func(op, _ string) error {
					if op == "CountIdle" { // between the scan and the count, both apps move
						s.Move("a", now)
						s.Move("b", now)
					}
					return nil
				}
			},
			want: tally{scanned: 2, moved: 2, Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "a scan reads past at most MalformedReadMax malformed runs beyond its limit, then counts",
			in:   runssweep.Input{Limit: 2, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				for i := range ledger.MalformedReadMax + 5 {
					s.Put(ledger.ExtensionRun{RunID: fmt.Sprintf("bad-%04d", i), Status: ledger.ExtensionRunning, LastMovedAt: idle.Add(-time.Hour), Malformed: "x"})
				}
				run(s, "behind", idle, false)
				quiet(s, 3000)
			},
			want: tally{scanned: ledger.MalformedReadMax + 2, Steps: sweeptest.Steps{Malformed: ledger.MalformedReadMax + 2, Aged: ledger.MalformedReadMax + 6, Live: 4006}},
		},
		{
			name: "the storm guard abandons none when most of the fleet looks idle",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: idleFleet,
			want: tally{scanned: 11, Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true, Failed: storm.Reason}},
		},
		{
			name:     "an operator's override goes past the guard",
			in:       runssweep.Input{Limit: 200, OlderThanMs: 60000},
			override: true,
			seed:     idleFleet,
			want: tally{swept: []string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09", "r10"},
				scanned: 11, Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true, Overridden: true}},
		},
		{
			name: "at the guard's limit it goes ahead",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, _ func()) {
				for i := range 10 {
					run(s, fmt.Sprintf("r%02d", i), idle, false)
				}
				quiet(s, 10)
			},
			want: tally{swept: []string{"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09"}, scanned: 10, Steps: sweeptest.Steps{Aged: 10, Live: 20}},
		},
		{
			name: "once the budget is spent the rest are deferred, not errored",
			in:   runssweep.Input{Limit: 200, OlderThanMs: 60000},
			seed: func(s *memstore.ExtensionRuns, cancel func()) {
				for i := range 4 {
					run(s, fmt.Sprintf("r%d", i), idle, false)
				}
				quiet(s, 20)
				var calls atomic.Int32
				s.Before = func(string) {
					if calls.Add(1) == 2 {
						cancel()
					}
				}
			},
			want: tally{swept: []string{"?"}, scanned: 4, deferred: 3, outOfBu: true, Steps: sweeptest.Steps{Aged: 4, Live: 24}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.NewExtensionRuns()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.seed(s, cancel)
			wf := runssweep.New(s, runssweep.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, ledger.LocalClock(func() time.Time { return now }))
			out, stats, err := wf.RunOnce(ctx, "run-1", c.in, c.override, logging.Discard())
			got := tally{scanned: stats.Scanned, moved: stats.Moved, errored: stats.Errored, deferred: stats.Deferred,
				released: stats.InterlocksReleased, heldByOther: stats.InterlocksHeldByOther, outOfBu: stats.OutOfBudget}
			for _, r := range out.Runs {
				got.swept = append(got.swept, r.RunID)
				if stored, _ := s.Get(r.RunID); r.IdleMs != now.Sub(stored.LastMovedAt).Milliseconds() || r.JobName != stored.JobName {
					t.Errorf("run %s listed with idle_ms %d job %q; stored %+v", r.RunID, r.IdleMs, r.JobName, stored)
				}
			}
			slices.Sort(got.swept)
			if out.Swept != len(out.Runs) {
				t.Errorf("swept %d, but %d runs listed", out.Swept, len(out.Runs))
			}
			got.Steps = sweeptest.StepsOf(t, stats.Steps, err)
			sweeptest.Tallied(t, got, c.want, func(x *tally) *[]string { return &x.swept })
			// What the output lists is what the store holds: abandoned, and nothing else.
			for _, id := range got.swept {
				if r, _ := s.Get(id); r.Status != ledger.ExtensionFailed || r.Outcome != ledger.OutcomeAbandoned || r.Settlement == nil ||
					r.Settlement.Reason != runssweep.ReasonIdle || r.Settlement.WorkflowRunUUID != "run-1" {
					t.Errorf("listed %s is not abandoned in the store: %+v", id, r)
				}
			}
		})
	}
}
