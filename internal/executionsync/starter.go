package executionsync

import (
	"context"
	"sync/atomic"

	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Starter starts the syncs of one run's candidates and reports how each start went. It is the
// seam between the scan and the syncs: Inline runs them here; the pipeline publishes them.
type Starter interface {
	Start(ctx context.Context, reqs []message.Sync) []SyncResult
}

// Inline runs each sync in this process, Concurrency at a time, in a random order; one Start
// call is one run. An error that stops executor calls (executor.Stops) stops new syncs as soon
// as its call returns, before it is recorded on its row, so no further call reaches the
// executor; the rest are deferred, not errored. A sync whose transaction failed (contention) is
// tried once more after the others.
type Inline struct {
	Syncer      *Syncer
	Concurrency int
}

// Start runs the syncs and returns their results in the order of reqs.
func (p *Inline) Start(ctx context.Context, reqs []message.Sync) []SyncResult {
	return startEach(ctx, reqs, p.Concurrency, func(req message.Sync, stop func(error)) SyncResult {
		return p.Syncer.sync(ctx, req, mode{callFailed: stop})
	})
}

// startEach is Inline's pool, shared with a dry run's (dryStarter).
func startEach(ctx context.Context, reqs []message.Sync, concurrency int, sync func(req message.Sync, stop func(error)) SyncResult) []SyncResult {
	results := make([]SyncResult, len(reqs))
	var stopped atomic.Pointer[string]
	stop := func(err error) {
		if why, ok := stopsCalls(err); ok {
			stopped.CompareAndSwap(nil, &why)
		}
	}
	parallel.ForEach(ctx, len(reqs), concurrency, func(i int) bool {
		switch why := stopped.Load(); {
		case why != nil:
			results[i] = SyncResult{RunnerExecutionUUID: reqs[i].RunnerExecutionUUID, Outcome: SyncDeferred, Why: *why}
			return false
		case ctx.Err() != nil:
			results[i] = SyncResult{RunnerExecutionUUID: reqs[i].RunnerExecutionUUID, Outcome: SyncDeferred, Why: "budget_spent"}
			return false
		}
		r := sync(reqs[i], stop)
		results[i] = r
		if r.Outcome == SyncErrored && r.Layer == LayerFirestore {
			workflow.NoteRow(ctx, r.Err)
		} else {
			workflow.NoteRow(ctx, nil)
		}
		// A settling transaction that lost to contention is worth one more try.
		return r.Outcome == SyncErrored && r.Layer == LayerFirestore
	})
	return results
}
