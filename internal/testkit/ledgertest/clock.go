package ledgertest

import (
	"context"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
)

// LocalClock is a process clock as a firestoreconn.Clock, for tests, which move time by hand; production
// reads Firestore's (firestoreconn.ServerClock).
func LocalClock(now func() time.Time) firestoreconn.Clock {
	return func(context.Context) (time.Time, error) { return now(), nil }
}
