package ledgertest

import (
	"context"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// LocalClock is a process clock as a ledger.Clock, for tests, which move time by hand; production
// reads Firestore's (ledger.ServerClock).
func LocalClock(now func() time.Time) ledger.Clock {
	return func(context.Context) (time.Time, error) { return now(), nil }
}
