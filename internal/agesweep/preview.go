package agesweep

import (
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// PreviewFailed notes a candidate whose read-only transaction returned err (deferred when the
// budget ran out, else an error) and says whether err was not nil.
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

// NewPreview is a dry run's preview once the guard has judged, counting the malformed rows the
// scan read past (nil for none).
func NewPreview(verdict storm.Verdict, malformed *workflow.Malformed) *explain.Preview {
	p := explain.NewPreview(explain.ReadOnlyTransaction)
	p.StormGuardWouldStop = verdict.Holds()
	if malformed != nil {
		p.Count("skip", "malformed", malformed.Count)
	}
	return p
}
