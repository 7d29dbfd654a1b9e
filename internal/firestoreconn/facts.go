package firestoreconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CheckDocID reports why id cannot name a Firestore document, or nil: it must be valid UTF-8 of
// at most 1,500 bytes, hold no "/", not be "." or "..", and not match __.*__.
func CheckDocID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("is empty")
	case len(id) > 1500:
		return fmt.Errorf("is longer than 1500 bytes")
	case !utf8.ValidString(id):
		return fmt.Errorf("is not valid UTF-8")
	case strings.Contains(id, "/"):
		return fmt.Errorf("holds a /")
	case id == "." || id == "..":
		return fmt.Errorf("is %q", id)
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return fmt.Errorf("matches __.*__, which Firestore reserves")
	}
	return nil
}

// Ambiguous reports whether a transaction (a settlement, a run record's start or end) that
// failed with err may have committed all the same: a Commit retried after Unavailable finds its
// transaction closed once the first try landed (InvalidArgument), and a deadline or a lost
// connection may fall after the server applied the writes. Such a failure is resolved by
// reading back what it wrote: a row that carries this run's settlement was settled by this run.
// Any other error wrote nothing (a refusal the transaction decided carries no such code).
func Ambiguous(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return false
}

// MinTime is the earliest timestamp Firestore stores: every timestamp is at or after it.
var MinTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

// InMax is how many values one `in` filter takes (Firestore's limit on a query's disjunctions).
const InMax = 30
