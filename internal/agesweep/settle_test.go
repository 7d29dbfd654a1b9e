package agesweep_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stalesweep/stalesweep/internal/agesweep"
)

type outcome struct {
	settled bool
	paused  string
}

func pausedLeft(o outcome) (outcome, bool) { return outcome{paused: o.paused}, o.paused != "" }

func TestSettleSettlesEachCandidateOnceInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[int]int{}
	results, errs, left := agesweep.Settle(context.Background(), []int{0, 1, 2, 3, 4, 5, 6, 7}, 3, func(_ context.Context, c int) (outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[c]++
		return outcome{settled: c%2 == 0}, nil
	}, pausedLeft)
	if left != nil {
		t.Errorf("left = %+v, want nil: no pause refused a candidate", *left)
	}
	for i := range 8 {
		if calls[i] != 1 || errs[i] != nil || results[i].settled != (i%2 == 0) {
			t.Errorf("candidate %d: %d calls, %+v, %v; want one call, settled %v", i, calls[i], results[i], errs[i], i%2 == 0)
		}
	}
}

func TestSettleStopsAtTheFirstPause(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	tried := 0
	results, errs, left := agesweep.Settle(context.Background(), make([]int, 20), 1, func(context.Context, int) (outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		tried++
		return outcome{paused: "fleet"}, nil
	}, pausedLeft)
	if tried != 1 {
		t.Errorf("%d transactions tried, want 1: none after the first a pause refused", tried)
	}
	if left == nil || left.paused != "fleet" {
		t.Fatalf("left = %v, want the pause's refusal", left)
	}
	for i, r := range results {
		if r.paused != "fleet" || errs[i] != nil {
			t.Errorf("candidate %d = %+v %v, want refused by the pause", i, r, errs[i])
		}
	}
}

func TestSettleRetriesAFailureOnceAndTriesNothingOnceTheBudgetIsSpent(t *testing.T) {
	t.Parallel()
	boom := errors.New("contention")
	var mu sync.Mutex
	calls := map[int]int{}
	_, errs, _ := agesweep.Settle(context.Background(), []int{0, 1, 2}, 2, func(_ context.Context, c int) (outcome, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[c]++
		if c == 1 {
			return outcome{}, boom
		}
		return outcome{settled: true}, nil
	}, pausedLeft)
	if calls[0] != 1 || calls[1] != 2 || calls[2] != 1 || !errors.Is(errs[1], boom) || errs[0] != nil {
		t.Errorf("calls %v, errs %v; want the failing candidate tried twice and the rest once", calls, errs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, errs, _ = agesweep.Settle(ctx, []int{0, 1}, 2, func(context.Context, int) (outcome, error) {
		called = true
		return outcome{}, nil
	}, pausedLeft)
	if called || !errors.Is(errs[0], context.Canceled) || !errors.Is(errs[1], context.Canceled) {
		t.Errorf("called %v, errs %v; want nothing tried and each noted with the context's error", called, errs)
	}
}
