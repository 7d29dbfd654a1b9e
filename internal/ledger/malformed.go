package ledger

import (
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"
)

// malformedSampleMax is how many undecodable documents a run names, in its stats and its logs.
const malformedSampleMax = 10

// MalformedReadMax is how many undecodable documents one run reads past, looking for rows it can
// settle. Malformed rows stay stale forever and come first in every scan; past this many a run
// stops, says it was capped, and leaves the rest for the next.
const MalformedReadMax = 1000

// Malformed tallies the documents a run's scans met but could not decode: a writer put a value
// of the wrong type in a field (reclaim_count: "0", a status that is a number). Such a document
// is skipped, never settled; the rest of the scope is swept.
type Malformed struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample,omitempty"` // the first documents' paths
}

// Note counts one undecodable document and, for the first malformedSampleMax of a run, names it
// in the sample and in a WARNING line with its path and the decoding error.
func (m *Malformed) Note(log *slog.Logger, path, why string) {
	m.Count++
	if len(m.Sample) < malformedSampleMax {
		m.Sample = append(m.Sample, path)
		log.Warn("a document this run scanned cannot be decoded; skipped, never settled: fix its writer",
			"path", path, "error", why)
	}
}

// Report is the tally for a run's stats: nil when the run met none.
func (m *Malformed) Report() *Malformed {
	if m.Count == 0 {
		return nil
	}
	return m
}

// decodeScanned decodes a scanned document into dst. When it cannot, dst is left zero and the
// error's text is returned, so a scan hands the row back marked malformed instead of failing:
// one bad writer must not stop a sweep.
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
