// Package explain says why one row was, or would be, settled or left alone: the row as stored,
// whether a scan of its workflow can see it, what its executor says now, and the verdict the
// workflow's own decision function returns for it. Each workflow explains its own rows with its
// own scan rules and decision code (never a copy of them); this package holds the shape they
// share (`stalesweep explain` renders it for a human).
package explain

// Options says how to explain.
type Options struct {
	// NoExecutor leaves the executor unasked: the verdict is then the one the row's stored state
	// decides, or "unknown without the executor".
	NoExecutor bool
}

// Check is one rule a scan applies before a row is a candidate (scope enabled, staleness field
// valid, age against the threshold, not paused), and whether the row passes it now.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// ExecutorAnswer is what the executor said of the row's execution now.
type ExecutorAnswer struct {
	Target   string         `json:"target,omitempty"`
	Verdict  string         `json:"verdict,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Evidence map[string]any `json:"evidence,omitempty"`
	Error    string         `json:"error,omitempty"` // the call failed: nothing would be settled
}

// Explanation is one row explained.
type Explanation struct {
	Collection   string `json:"collection"`
	ID           string `json:"id"`
	WorkflowType string `json:"workflow_type"`
	// Scope names the run that would sweep the row (workflow.ScopeValues.Key).
	Scope string         `json:"scope,omitempty"`
	Row   map[string]any `json:"row"`
	// Visible says whether a scan of the workflow would return the row now.
	Visible bool    `json:"visible"`
	Checks  []Check `json:"checks"`
	// Executor is what the executor said now; nil when it was not asked (Options.NoExecutor,
	// or a workflow that settles on age alone).
	Executor *ExecutorAnswer `json:"executor,omitempty"`
	// Verdict is what the workflow's decision function returns for the row now, in its own terms.
	Verdict string `json:"verdict"`
	// Outcome is what a settlement would write (succeeded, failed, lost, abandoned, ...).
	Outcome string `json:"outcome,omitempty"`
	// Rule names the rule that decided the verdict (a settlement reason, a refusal, a guard).
	Rule   string `json:"rule"`
	Detail string `json:"detail,omitempty"`
	// Last is what stalesweep recorded on the row last: its last sync, settlement and evidence.
	Last map[string]any `json:"last,omitempty"`
}

// Decided sets Visible from the checks.
func (e *Explanation) Decided() {
	e.Visible = true
	for _, c := range e.Checks {
		e.Visible = e.Visible && c.OK
	}
}
