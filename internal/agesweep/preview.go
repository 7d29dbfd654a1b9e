package agesweep

import (
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// PreviewFailed notes in a dry run's preview a candidate whose read-only transaction returned
// err: deferred when the run's budget ran out (outOfBudget), an error otherwise. It says whether
// it noted one, that is whether err is not nil.
func PreviewFailed(p *explain.Preview, id string, err error, outOfBudget bool) bool {
	switch {
	case err == nil:
		return false
	case outOfBudget:
		p.Add(id, "defer", "out_of_budget", "not re-read: the run's budget ran out")
	default:
		p.Add(id, "error", "read_failed", err.Error())
	}
	return true
}

// NewPreview is a dry run's preview once the guard has judged (verdict): re-read with
// read-only transactions, saying whether the guard would stop the run, and counting the
// malformed rows the scan read past (malformed, nil for none).
func NewPreview(verdict storm.Verdict, malformed *workflow.Malformed) *explain.Preview {
	p := explain.NewPreview(explain.ReadOnlyTransaction)
	p.StormGuardWouldStop = verdict.Holds()
	if malformed != nil {
		p.Count("skip", "malformed", malformed.Count)
	}
	return p
}
