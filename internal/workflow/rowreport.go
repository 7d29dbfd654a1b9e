package workflow

import (
	"log/slog"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// A run's stats name the rows its scans met but could not settle: the documents that do not
// decode (Malformed) and the active rows no scan can see (ReportInvisible). The scans mark the
// first (each document type's Malformed field) and the stores count the second
// (ledger.Invisible); what a run tallies, logs and reports of them is the workflow's.

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

// ReportInvisible logs what a count of invisible rows found (v, err) — WARNING naming the
// collection, the field a writer must stamp, and a sample of ids — and returns it for a run's
// stats. A failed count is logged, not fatal: it is a report, not a rule, and reads as nothing.
func ReportInvisible(log *slog.Logger, collection, field string, v ledger.Invisible, err error) *ledger.Invisible {
	switch {
	case err != nil:
		log.Warn("could not count the active rows no scan can see", "collection", collection, "error", err.Error())
		return nil
	case v.Count > 0:
		log.Warn("active rows no scan can see: their "+field+" is missing or not a timestamp; a writer must stamp it (docs/data-model.md); they are never settled",
			alerts.InvisibleRows.Attr(), "collection", collection, "invisible", v.Count, "sample", v.Sample)
	}
	if v.Count == 0 {
		return nil
	}
	return &v
}
