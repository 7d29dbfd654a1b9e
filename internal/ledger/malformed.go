package ledger

import (
	"time"

	"cloud.google.com/go/firestore"
)

// decodeScanned decodes a scanned document into dst, or returns the error's text so that the
// scan hands the row back malformed: one bad writer must not stop a sweep.
func decodeScanned[T any](snap *firestore.DocumentSnapshot, dst *T) string {
	if err := snap.DataTo(dst); err != nil {
		var zero T
		*dst = zero
		return err.Error()
	}
	return ""
}

// scannedTime reads a scanned document's ordering field on its own, for the cursor, even when
// the rest of the document would not decode (the scan's range filter made it a timestamp).
func scannedTime(snap *firestore.DocumentSnapshot, field string) time.Time {
	v, err := snap.DataAt(field)
	if err != nil {
		return time.Time{}
	}
	t, _ := v.(time.Time)
	return t
}
