// Package localpipeline lays the pipeline's Pub/Sub topology on a Pub/Sub emulator: the three
// topics, and one push subscription per topic that delivers to the matching function target of
// a local functions server (stalesweep serve), as Eventarc does in production.
//
// The emulator's push delivers the raw push body ({"subscription", "message"}) with no ce-*
// headers; the event targets read that shape as well as Eventarc's messagePublished CloudEvent
// (message.DecodePush), so the local chain runs the same code as production.
package localpipeline

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// AckDeadlineSeconds is how long a push may take before the emulator redelivers it; above the
// longest run budget the local server uses.
const AckDeadlineSeconds = 600

// Create creates the topics and push subscriptions, pushing to functionsURL/TARGET. What exists
// already is left as it is, so Create can run twice.
func Create(ctx context.Context, client *pubsub.Client, topics pipeline.Topics, functionsURL string) error {
	project := client.Project()
	for _, r := range pipeline.Routes(topics) {
		topic := fmt.Sprintf("projects/%s/topics/%s", project, r.Topic)
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		sub := &pubsubpb.Subscription{
			Name:               fmt.Sprintf("projects/%s/subscriptions/%s", project, r.Subscription),
			Topic:              topic,
			AckDeadlineSeconds: AckDeadlineSeconds,
			PushConfig:         &pubsubpb.PushConfig{PushEndpoint: strings.TrimSuffix(functionsURL, "/") + "/" + r.Target},
		}
		if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, sub); err != nil && status.Code(err) != codes.AlreadyExists {
			return fmt.Errorf("create subscription %s: %w", sub.Name, err)
		}
	}
	return nil
}
