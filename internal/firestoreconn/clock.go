package firestoreconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Staleness is measured on Firestore's clock alone. Writers stamp the fields staleness is
// judged on (extension_runs.last_moved_at, tasks.last_activity_at,
// workspace_leases.heartbeat_at) with the server timestamp, and a sweep takes its "now" from
// Firestore too (ServerClock), so no process's own clock — a worker's or the sweeper's — enters
// the comparison: a worker whose clock is an hour off is judged on when Firestore accepted its
// writes, not on what its clock said.

// Clock tells the time a run judges staleness at.
type Clock func(ctx context.Context) (time.Time, error)

// ClockCollection holds the document ServerClock reads. It is never written: reading a missing
// document still returns the server's read time.
const ClockCollection = "sweep_clock"

// ServerClock is Firestore's clock: the read time of one read (of a document that need not
// exist), which costs one billed read per call. A sweep calls it once, at its start.
func ServerClock(client *firestore.Client) Clock {
	ref := client.Collection(ClockCollection).Doc("now")
	return func(ctx context.Context) (time.Time, error) {
		snap, err := ref.Get(ctx)
		if err != nil && status.Code(err) != codes.NotFound {
			return time.Time{}, fmt.Errorf("read firestore's clock: %w", err)
		}
		if snap == nil || snap.ReadTime.IsZero() {
			return time.Time{}, errors.New("read firestore's clock: the read carried no read time")
		}
		return snap.ReadTime.UTC(), nil
	}
}
