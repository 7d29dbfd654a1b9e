package parallel

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

func TestForEachCallsEveryIndexAndRetriesOnlyWhatAsked(t *testing.T) {
	var mu sync.Mutex
	calls := map[int]int{}
	var inFlight, peak atomic.Int32
	ForEach(context.Background(), 100, 4, func(i int) bool {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer inFlight.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		calls[i]++
		return i%10 == 0 && calls[i] == 1
	})
	for i := range 100 {
		want := 1
		if i%10 == 0 {
			want = 2
		}
		if calls[i] != want {
			t.Errorf("index %d called %d times, want %d", i, calls[i], want)
		}
	}
	if peak.Load() > 4 {
		t.Errorf("%d calls at once, limit 4", peak.Load())
	}
}

func TestForEachDoesNotRetryOnceTheContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	ForEach(ctx, 10, 2, func(int) bool {
		calls.Add(1)
		cancel()
		return true
	})
	if calls.Load() != 10 {
		t.Errorf("%d calls, want 10 (no retries after cancel)", calls.Load())
	}
	ForEach(context.Background(), 0, 3, func(int) bool { t.Error("called for n = 0"); return false })
}
