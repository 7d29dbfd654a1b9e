package workflow

import (
	"log/slog"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// malformedSampleMax is how many undecodable documents a run names, in its stats and its logs.
const malformedSampleMax = 10

// MalformedReadMax is how many undecodable documents one run reads past: they stay stale forever
// and come first in every scan, so past this many a run stops, says so, and leaves the rest.
const MalformedReadMax = 1000

// Malformed tallies the documents a run's scans could not decode: each is skipped, never settled.
type Malformed struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample,omitempty"` // the first documents' paths
}

// Note counts one undecodable document, naming the first malformedSampleMax in the sample and a WARNING.
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

// ReportInvisible logs a count of invisible rows for a run's stats; a failed count is a report, not a rule.
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
