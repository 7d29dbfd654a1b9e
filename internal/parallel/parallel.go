// Package parallel runs one run's per-row work on a bounded pool.
//
// Rows are taken in a random order: concurrent runs over the same rows (two sweeps whose guards
// overlapped, a redelivered message) then meet on different rows instead of marching through the
// same list in step, where every transaction of one would wait on a lock held by another.
package parallel

import (
	"context"
	"math/rand/v2"
	"sync"
)

// ForEach calls f(i) for every i in [0, n), at most limit at a time, then once more for each i
// whose call asked to retry, unless ctx is done; f must be safe to call twice for the same i.
func ForEach(ctx context.Context, n, limit int, f func(i int) (retry bool)) {
	order := rand.Perm(n)
	again := make([]bool, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(max(limit, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				again[i] = f(i)
			}
		}()
	}
	for _, i := range order {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for i := range n {
		if again[i] && ctx.Err() == nil {
			f(i)
		}
	}
}
