package agesweep

import (
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
)

// Steps is what every age sweep's Stats report of the steps they share (doc.go); each embeds
// it, so that its fields stand among the sweep's own in the run record.
type Steps struct {
	// Invisible counts the scope's active rows no scan can see (their staleness field missing
	// or not a timestamp), with a sample of ids: reported, never settled.
	Invisible *ledger.Invisible `json:"invisible,omitempty"`
	// Malformed counts the scanned rows that could not be decoded, with a sample of paths:
	// skipped, never settled.
	Malformed *ledger.Malformed `json:"malformed,omitempty"`
	// StormGuard is the guard's verdict: the aged rows (all of them, not only this run's share)
	// against the live ones, as the sweep's Guard names them.
	StormGuard *storm.Verdict `json:"storm_guard,omitempty"`
	// Preview is, in a dry run, what the run would have done row by row (the sweep's counts are
	// then what it would have done too); nil in a real run.
	Preview *explain.Preview `json:"preview,omitempty"`
}
