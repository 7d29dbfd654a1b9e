// Package pipeline is the Pub/Sub side of stalesweep: the three topics and their routes, the
// publisher, the Dispatcher that turns one tick into one sweep message per scope, and the
// Starter that hands an execution-sync run's candidates to the syncs topic.
//
//	Cloud Scheduler ─tick─▶ stalesweep-ticks ─▶ Dispatch ─one per scope─▶ stalesweep-sweeps
//	    ─▶ Sweep (one run) ─one per stale row─▶ stalesweep-syncs ─▶ SyncExecution
//
// What holds:
//   - Every step is idempotent by the state it reads, never by message id alone: a sweep's
//     workflow_run_uuid derives from the tick's id, the workflow type and the scope (RunUUID), so
//     a redelivered tick or sweep names a run that exists; a redelivered sync finds its receipt.
//   - Enumeration is paged and bounded; publishing is batched, bounded in flight, and each batch
//     waits for Pub/Sub's acknowledgement, which is what "published" means.
package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/message"
)

// Default topic names.
const (
	TicksDefault  = "stalesweep-ticks"
	SweepsDefault = "stalesweep-sweeps"
	SyncsDefault  = "stalesweep-syncs"
	// EndsDefault is the topic the log sinks publish the executors' completion entries to; no
	// code of stalesweep publishes to it.
	EndsDefault = "stalesweep-ends"
)

// Topics names the pipeline's topics (ids in the process's project, or full names).
type Topics struct {
	Ticks, Sweeps, Syncs, Ends string
}

// WithDefaults fills empty names with the defaults.
func (t Topics) WithDefaults() Topics {
	t.Ticks = cmp.Or(t.Ticks, TicksDefault)
	t.Sweeps = cmp.Or(t.Sweeps, SweepsDefault)
	t.Syncs = cmp.Or(t.Syncs, SyncsDefault)
	t.Ends = cmp.Or(t.Ends, EndsDefault)
	return t
}

// Result is one publish's end: the server's message id, or why it failed.
type Result struct {
	ID  string
	Err error
}

// Publisher publishes batches and waits for each message's acknowledgement (*TopicPublisher).
type Publisher interface {
	PublishBatch(ctx context.Context, topic string, msgs []message.Outgoing) []Result
}

// Defaults of TopicPublisher.
const (
	PublishTimeoutDefault = 30 * time.Second // the client's own retries, per bundle
	MaxInFlightDefault    = 500              // messages awaiting acknowledgement at once
)

// TopicPublisher publishes through a Pub/Sub client, one cached publisher per topic.
type TopicPublisher struct {
	client      *pubsub.Client
	timeout     time.Duration
	maxInFlight int

	mu   sync.Mutex
	pubs map[string]*pubsub.Publisher
}

// NewTopicPublisher returns a publisher on client. Zero values take the defaults.
func NewTopicPublisher(client *pubsub.Client, timeout time.Duration, maxInFlight int) *TopicPublisher {
	return &TopicPublisher{
		client:      client,
		timeout:     cmp.Or(timeout, PublishTimeoutDefault),
		maxInFlight: cmp.Or(maxInFlight, MaxInFlightDefault),
		pubs:        map[string]*pubsub.Publisher{},
	}
}

func (p *TopicPublisher) publisher(topic string) *pubsub.Publisher {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pub, ok := p.pubs[topic]; ok {
		return pub
	}
	pub := p.client.Publisher(topic)
	pub.PublishSettings.Timeout = p.timeout
	// The client's own flow control keeps at most maxInFlight messages unacknowledged: a batch
	// of any size streams through it, instead of waiting for each slice of maxInFlight in turn.
	pub.PublishSettings.FlowControlSettings = pubsub.FlowControlSettings{
		MaxOutstandingMessages: p.maxInFlight,
		LimitExceededBehavior:  pubsub.FlowControlBlock,
	}
	p.pubs[topic] = pub
	return pub
}

// PublishBatch publishes msgs, at most maxInFlight awaiting acknowledgement at once, and returns
// each one's result in order. A message not published before ctx ends fails with ctx's error.
func (p *TopicPublisher) PublishBatch(ctx context.Context, topic string, msgs []message.Outgoing) []Result {
	pub := p.publisher(topic)
	out := make([]Result, len(msgs))
	pending := make([]*pubsub.PublishResult, len(msgs))
	for i, m := range msgs {
		pending[i] = pub.Publish(ctx, &pubsub.Message{Data: m.Data, Attributes: m.Attributes})
	}
	for i, r := range pending {
		id, err := r.Get(ctx)
		if err != nil {
			err = fmt.Errorf("publish to %s: %w", topic, err)
		}
		out[i] = Result{ID: id, Err: err}
	}
	return out
}

// Stop flushes and stops every publisher.
func (p *TopicPublisher) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pub := range p.pubs {
		pub.Stop()
	}
	clear(p.pubs)
}

// SyncStarter is the pipeline's executionsync.Starter: a candidate is started once Pub/Sub acknowledged its message.
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
