package agesweep

import "github.com/stalesweep/stalesweep/internal/explain"

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
