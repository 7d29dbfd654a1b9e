package agesweep

import (
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Steps is what every age sweep's Stats report of the steps they share (doc.go); each embeds
// it, so that its fields stand among the sweep's own in the run record.
type Steps struct {
	// Invisible counts the scope's active rows no scan can see, with a sample of ids.
	Invisible *ledger.Invisible `json:"invisible,omitempty"`
	// Malformed counts the scanned rows that could not be decoded, with a sample of paths.
	Malformed *workflow.Malformed `json:"malformed,omitempty"`
	// StormGuard is the guard's verdict, as the sweep's Guard names its counts.
	StormGuard *storm.Verdict `json:"storm_guard,omitempty"`
	// Preview is, in a dry run, what the run would have done row by row; nil in a real run.
	Preview *explain.Preview `json:"preview,omitempty"`
}
