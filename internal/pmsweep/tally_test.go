package pmsweep_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

// tally is what a sweep decided, in a form a table can state.
type tally struct {
	reclaimed, raced            []string // task ids, sorted
	racedWhy                    map[string]int
	scanned                     int64
	poisonedIDs                 []string
	stale, poisoned, nearTTL    int
	errored, deferred           int
	capped, outOfBudget, warned bool
	sweeptest.Steps
}

// The decision and tally logic of one sweep of one queue, against the in-memory store (both
// tiers): which tasks are reclaimed, raced or left, and how each is counted.
func TestSweepDecidesAndCountsEachTask(t *testing.T) {
	now := epoch
	const ttl = 300
	stale := now.Add(-time.Hour)
	// task puts a working task of queue q silent since `at`.
	task := func(s *memstore.Tasks, id string, at time.Time) {
		s.Put(ledger.Task{Queue: "q", ID: id, Slug: "slug-" + id, Status: ledger.TaskWorking, WorkerID: "w", CreatedAt: at,
			LastActivityAt: at, StatusTip: "st-" + id, HeartbeatTip: "hb-" + id})
	}
	// busy gives the queue enough live tasks that the storm guard stays out of the way.
	busy := func(s *memstore.Tasks, n int) {
		for i := range n {
			task(s, fmt.Sprintf("live-%02d", i), now.Add(-time.Second))
		}
	}
	// silentQueue has most of the queue silent: eleven stale tasks beside ten live ones.
	silentQueue := func(s *memstore.Tasks, _ func()) {
		for i := range 11 {
			task(s, fmt.Sprintf("s%02d", i), stale)
		}
		busy(s, 10)
	}
	in := pmsweep.Input{Queue: "q", TTL: ttl, Reclaimer: "sweeper"}
	dry := in
	dry.DryRun = true
	for _, c := range []struct {
		name     string
		cfg      pmsweep.Config
		in       pmsweep.Input
		override bool
		seed     func(s *memstore.Tasks, cancel func())
		want     tally
	}{
		{
			name: "stale tasks are reclaimed, tasks near the TTL counted and warned of, the rest left",
			in:   in,
			seed: func(s *memstore.Tasks, _ func()) {
				task(s, "a", stale)
				task(s, "b", now.Add(-301*time.Second))
				task(s, "near", now.Add(-201*time.Second)) // past 2/3 of the TTL
				task(s, "not-near", now.Add(-200*time.Second))
				s.Put(ledger.Task{Queue: "q", ID: "done", Status: ledger.TaskDone, LastActivityAt: stale})
				busy(s, 20)
			},
			want: tally{reclaimed: []string{"a", "b"}, scanned: 25, stale: 2, nearTTL: 1, warned: true, Steps: sweeptest.Steps{Aged: 2, Live: 24}},
		},
		{
			name: "a task whose worker was alive after all is raced, by why",
			in:   in,
			seed: func(s *memstore.Tasks, _ func()) {
				task(s, "a", stale)
				task(s, "beat", stale)
				task(s, "finished", stale)
				busy(s, 20)
				s.Before = func(id string) {
					switch id {
					case "beat":
						s.Heartbeat("q", id, "hb-new", now)
					case "finished":
						s.Put(ledger.Task{Queue: "q", ID: id, Status: ledger.TaskDone, LastActivityAt: now})
					}
				}
			},
			want: tally{reclaimed: []string{"a"}, raced: []string{"beat", "finished"}, racedWhy: map[string]int{"heartbeat_moved": 1, "not_working": 1},
				scanned: 23, stale: 3, Steps: sweeptest.Steps{Aged: 3, Live: 23}},
		},
		{
			name: "a task reclaimed too often is failed as poison, and listed poisoned, not reclaimed",
			in:   in,
			cfg:  pmsweep.Config{MaxReclaims: 2},
			seed: func(s *memstore.Tasks, _ func()) {
				s.Put(ledger.Task{Queue: "q", ID: "p", Status: ledger.TaskWorking, LastActivityAt: stale, HeartbeatTip: "hb", ReclaimCount: 2})
				s.Put(ledger.Task{Queue: "q", ID: "ok", Status: ledger.TaskWorking, LastActivityAt: stale, HeartbeatTip: "hb", ReclaimCount: 1})
				busy(s, 20)
			},
			want: tally{reclaimed: []string{"ok"}, poisonedIDs: []string{"p"}, scanned: 22, stale: 2, poisoned: 1, Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "a dry run lists what it would reclaim and writes nothing",
			in:   dry,
			seed: func(s *memstore.Tasks, _ func()) {
				task(s, "a", stale)
				busy(s, 20)
				s.Before = func(id string) { panic("a dry run settled " + id) }
			},
			want: tally{reclaimed: []string{"a"}, scanned: 21, stale: 1, Steps: sweeptest.Steps{Aged: 1, Live: 21}},
		},
		{
			name: "past MaxStale the rest are deferred and counted for the guard",
			in:   in,
			cfg:  pmsweep.Config{MaxStale: 2, PageSize: 3},
			seed: func(s *memstore.Tasks, _ func()) {
				for i := range 5 {
					task(s, fmt.Sprintf("s%d", i), stale.Add(time.Duration(i)*time.Second))
				}
				busy(s, 20)
			},
			want: tally{reclaimed: []string{"s0", "s1"}, scanned: 25, stale: 5, deferred: 3, capped: true, Steps: sweeptest.Steps{Aged: 5, Live: 25}},
		},
		{
			name: "malformed tasks are counted and skipped, invisible ones reported and counted as working",
			in:   in,
			seed: func(s *memstore.Tasks, _ func()) {
				task(s, "a", stale)
				s.Put(ledger.Task{Queue: "q", ID: "bad", Status: ledger.TaskWorking, LastActivityAt: stale.Add(-time.Hour), Malformed: "reclaim_count: not an int"})
				s.PutInvisible("q", "inv")
				busy(s, 20)
			},
			want: tally{reclaimed: []string{"a"}, scanned: 23, stale: 1, Steps: sweeptest.Steps{Malformed: 1, Invisible: 1, Aged: 1, Live: 23}},
		},
		{
			name: "past MalformedReadMax malformed tasks the scan stops, capped",
			in:   in,
			cfg:  pmsweep.Config{PageSize: 500},
			seed: func(s *memstore.Tasks, _ func()) {
				for i := range ledger.MalformedReadMax + 1 {
					s.Put(ledger.Task{Queue: "q", ID: fmt.Sprintf("bad-%04d", i), Status: ledger.TaskWorking, LastActivityAt: stale.Add(-time.Hour), Malformed: "x"})
				}
				task(s, "behind", stale)
				busy(s, 2000)
			},
			want: tally{scanned: 3002, capped: true, stale: ledger.MalformedReadMax + 2, deferred: ledger.MalformedReadMax + 2, Steps: sweeptest.Steps{Malformed: ledger.MalformedReadMax, Aged: ledger.MalformedReadMax + 2, Live: 3002}},
		},
		{
			name: "a failed reclaim is counted; the others go ahead",
			in:   in,
			seed: func(s *memstore.Tasks, _ func()) {
				task(s, "a", stale)
				task(s, "b", stale)
				busy(s, 20)
				s.Fail = func(op, id string) error {
					if op == "ReclaimTask" && id == "b" {
						return errors.New("aborted")
					}
					return nil
				}
			},
			want: tally{reclaimed: []string{"a"}, scanned: 22, stale: 2, errored: 1, Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "the storm guard reclaims none when most of the queue is silent",
			in:   in,
			seed: silentQueue,
			want: tally{scanned: 21, stale: 11, Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true, Failed: storm.Reason}},
		},
		{
			name: "a dry run past the guard warns instead of failing",
			in:   dry,
			seed: silentQueue,
			want: tally{reclaimed: []string{"s00", "s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10"},
				scanned: 21, stale: 11, warned: true, Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true}},
		},
		{
			name:     "an operator's override goes past the guard",
			in:       in,
			override: true,
			seed:     silentQueue,
			want: tally{reclaimed: []string{"s00", "s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10"},
				scanned: 21, stale: 11, Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true, Overridden: true}},
		},
		{
			name: "once the budget is spent the rest are deferred, not errored",
			in:   in,
			seed: func(s *memstore.Tasks, cancel func()) {
				for i := range 4 {
					task(s, fmt.Sprintf("s%d", i), stale)
				}
				busy(s, 20)
				var calls atomic.Int32
				s.Before = func(string) {
					if calls.Add(1) == 2 {
						cancel()
					}
				}
			},
			want: tally{reclaimed: []string{"?"}, scanned: 24, stale: 4, deferred: 3, outOfBudget: true, Steps: sweeptest.Steps{Aged: 4, Live: 24}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.NewTasks()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.seed(s, cancel)
			cfg := c.cfg
			cfg.Concurrency = 1
			wf := pmsweep.New(s, cfg, ledger.LocalClock(func() time.Time { return now }))
			out, stats, err := wf.RunOnce(ctx, c.in, c.override, logging.Discard())
			got := tally{scanned: out.Scanned, stale: out.Stale, poisoned: stats.Poisoned, nearTTL: stats.NearTTL, errored: stats.Errored,
				deferred: stats.Deferred, capped: stats.Capped, outOfBudget: stats.OutOfBudget, warned: len(out.Warnings) > 0}
			for _, r := range out.Reclaimed {
				got.reclaimed = append(got.reclaimed, r.Task)
			}
			for _, r := range out.Raced {
				got.raced = append(got.raced, r.Task)
			}
			for _, r := range out.Poisoned {
				got.poisonedIDs = append(got.poisonedIDs, r.Task)
			}
			slices.Sort(got.reclaimed)
			slices.Sort(got.raced)
			if len(stats.RacedWhy) > 0 {
				got.racedWhy = maps.Clone(stats.RacedWhy)
			}
			got.Steps = sweeptest.StepsOf(t, stats.Steps, err)
			sweeptest.Tallied(t, got, c.want, func(x *tally) *[]string { return &x.reclaimed })
			// What a real sweep lists as reclaimed is what the store holds: requeued (or failed as
			// poison) by this reclaimer, with the status entry the output names.
			for status, listed := range map[string][]pmsweep.Reclaimed{ledger.TaskNew: out.Reclaimed, ledger.TaskFailed: out.Poisoned} {
				for _, r := range listed {
					tk, _ := s.Get("q", r.Task)
					switch {
					case c.in.DryRun && tk.Status != ledger.TaskWorking:
						t.Errorf("a dry run wrote %s: %+v", r.Task, tk)
					case !c.in.DryRun && (tk.Status != status || tk.StatusTip != r.ReclaimStatusSHA || tk.WorkerID != ""):
						t.Errorf("listed %s as %s (status sha %s), the store holds %+v", r.Task, status, r.ReclaimStatusSHA, tk)
					}
				}
			}
		})
	}
}
