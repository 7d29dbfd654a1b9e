package executionsync

import (
	"context"
	"sync"
	"sync/atomic"
)

// Starter starts the syncs of one run's candidates and reports how each start went. It is the
// seam between the scan and the syncs: Inline runs them here; the pipeline publishes them.
type Starter interface {
	Start(ctx context.Context, reqs []SyncRequest) []SyncResult
}

// Inline runs each sync in this process, Concurrency at a time. One Start call is one run: once
// a sync meets an error that stops executor calls (ResourceExhausted, PermissionDenied,
// Unauthenticated), no further sync of that call reaches the executor, and once ctx is done no
// further sync starts. Either way the rest are deferred, not errored.
type Inline struct {
	Syncer      *Syncer
	Concurrency int
}

// Start runs the syncs and returns their results in the order of reqs.
func (p *Inline) Start(ctx context.Context, reqs []SyncRequest) []SyncResult {
	results := make([]SyncResult, len(reqs))
	var stopped atomic.Pointer[string]
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(max(p.Concurrency, 1), len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				switch why := stopped.Load(); {
				case why != nil:
					results[i] = SyncResult{RunnerExecutionUUID: reqs[i].RunnerExecutionUUID, Outcome: SyncDeferred, Why: *why}
					continue
				case ctx.Err() != nil:
					results[i] = SyncResult{RunnerExecutionUUID: reqs[i].RunnerExecutionUUID, Outcome: SyncDeferred, Why: "budget_spent"}
					continue
				}
				r := p.Syncer.Sync(ctx, reqs[i])
				if r.Outcome == SyncErrored && r.Layer == LayerExecutor {
					if why, ok := stopsCalls(r.Err); ok {
						stopped.CompareAndSwap(nil, &why)
					}
				}
				results[i] = r
			}
		}()
	}
	for i := range reqs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return results
}
