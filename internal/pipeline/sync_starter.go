package pipeline

import (
	"context"
	"encoding/json"

	"github.com/stalesweep/stalesweep/internal/executionsync"
)

// SyncStarter is the pipeline's executionsync.Starter: it publishes one message per candidate
// to the syncs topic. A candidate is started once Pub/Sub acknowledged its message.
type SyncStarter struct {
	Publisher Publisher
	Topic     string
}

// Start publishes the requests and reports, per request, published or why not.
func (s *SyncStarter) Start(ctx context.Context, reqs []executionsync.SyncRequest) []executionsync.SyncResult {
	msgs := make([]Message, len(reqs))
	for i, r := range reqs {
		data, _ := json.Marshal(r) // a SyncRequest always encodes
		msgs[i] = Message{Data: data, Attributes: map[string]string{
			AttrWorkflowRunUUID:     r.WorkflowRunUUID,
			AttrRunnerExecutionUUID: r.RunnerExecutionUUID,
		}}
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
