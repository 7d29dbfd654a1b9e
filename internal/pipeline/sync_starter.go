package pipeline

import (
	"context"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/message"
)

// SyncStarter is the pipeline's executionsync.Starter: it publishes one message per candidate
// to the syncs topic. A candidate is started once Pub/Sub acknowledged its message.
type SyncStarter struct {
	Publisher Publisher
	Topic     string
}

// Start publishes the requests and reports, per request, published or why not.
func (s *SyncStarter) Start(ctx context.Context, reqs []message.Sync) []executionsync.SyncResult {
	msgs := make([]message.Outgoing, len(reqs))
	for i, r := range reqs {
		msgs[i] = message.EncodeSync(r)
	}
	results := make([]executionsync.SyncResult, len(reqs))
	for i, res := range s.Publisher.PublishBatch(ctx, s.Topic, msgs) {
		r := executionsync.SyncResult{RunnerExecutionUUID: reqs[i].RunnerExecutionUUID, Outcome: executionsync.SyncPublished}
		switch {
		case res.Err != nil && ctx.Err() != nil:
			r.Outcome, r.Why = executionsync.SyncDeferred, "budget_spent"
		case res.Err != nil:
			r.Outcome, r.Err, r.Layer = executionsync.SyncErrored, res.Err, executionsync.LayerPubSub
		}
		results[i] = r
	}
	return results
}
