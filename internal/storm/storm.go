// Package storm is the guard of the workflows that settle rows on age alone. Age is evidence of
// death only while the writers can write: a stall of Firestore or the network makes every row
// look dead at once, and settling on age then evicts live workers by the thousand. So before a
// run settles anything on age, it counts those rows against the scope's live ones; above Fraction
// of them (and MinRows, so small scopes are not held to a percentage) it settles none and fails
// with reason storm_guard. Verdicts an executor or a record confirms are not age alone: they are
// neither counted nor held back. docs/operations.md (The storm guard) has the override.
package storm

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Defaults of Config.
const (
	FractionDefault = 0.5
	MinRowsDefault  = 10
)

// Reason is the failure reason of a run the guard stopped.
const Reason = "storm_guard"

// ErrTripped is the error of a run the guard stopped.
var ErrTripped = errors.New("storm guard")

// Config sets the guard. Zero values take the defaults.
type Config struct {
	// Fraction of a scope's live rows one run may settle on age alone; 1 turns the guard off.
	Fraction float64
	// MinRows a run may always settle on age alone, whatever the fraction.
	MinRows int64
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Fraction = cmp.Or(c.Fraction, FractionDefault)
	c.MinRows = cmp.Or(c.MinRows, MinRowsDefault)
	return c
}

// Validate reports a setting the guard cannot work with.
func (c Config) Validate() error {
	switch {
	case !(c.Fraction > 0 && c.Fraction <= 1):
		return fmt.Errorf("storm guard: fraction %v must be in (0, 1]", c.Fraction)
	case c.MinRows < 1:
		return fmt.Errorf("storm guard: minimum %d must be at least 1", c.MinRows)
	}
	return nil
}

// Verdict is what the guard judged of one run; it goes into the run's stats.
type Verdict struct {
	Aged       int64 `json:"aged"`                 // rows the run would settle on age alone
	Live       int64 `json:"live"`                 // the scope's live rows
	Allowed    int64 `json:"allowed"`              // the most it may settle on age alone
	Tripped    bool  `json:"tripped"`              // Aged > Allowed
	Overridden bool  `json:"overridden,omitempty"` // an operator let a tripped run go ahead
}

// Judge decides on aged rows out of live ones.
func (c Config) Judge(aged, live int64) Verdict {
	allowed := max(c.MinRows, int64(c.Fraction*float64(live)))
	return Verdict{Aged: aged, Live: live, Allowed: allowed, Tripped: aged > allowed}
}

// Override applies the operator's word: only a tripped verdict can be overridden.
func (v Verdict) Override(override bool) Verdict {
	v.Overridden = v.Tripped && override
	return v
}

// Holds reports whether the verdict stops the run: tripped and not overridden.
func (v Verdict) Holds() bool { return v.Tripped && !v.Overridden }

// Err is the error of a run the verdict stopped.
func (v Verdict) Err() error {
	return fmt.Errorf("%w: %d of %d live rows would be settled on age alone, more than the %d allowed; settled none of them "+
		"(a stall of the store or the network looks like mass death: check the workers, then override from the stalesweep command if they really are gone)",
		ErrTripped, v.Aged, v.Live, v.Allowed)
}

// StepError is the failure of a run the verdict stopped, with reason Reason.
func (v Verdict) StepError() *workflow.StepError {
	return &workflow.StepError{Step: Reason, Layer: "workflow", Reason: Reason, Err: v.Err()}
}
