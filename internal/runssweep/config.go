package runssweep

import (
	"cmp"

	"github.com/stalesweep/stalesweep/internal/agesweep"
)

// Input defaults and bounds, as seed 000 gives them.
const (
	LimitDefault = 200
	LimitMax     = 1000
)

// Defaults of Config.
const (
	ScheduledFloorMsDefault = 60000 // the least older_than_ms the scheduled path accepts
	ConcurrencyDefault      = agesweep.ConcurrencyDefault
	BudgetDefault           = agesweep.BudgetDefault
)

// Config tunes the sweep. Zero values take the defaults.
type Config struct {
	// ScheduledFloorMs is the least older_than_ms a run not started from the command accepts.
	ScheduledFloorMs int64
	// Bounds' storm guard tells a stall of the store or the network from a fleet of dead apps.
	agesweep.Bounds
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.ScheduledFloorMs = cmp.Or(c.ScheduledFloorMs, ScheduledFloorMsDefault)
	c.Bounds = c.Bounds.WithDefaults()
	return c
}

// Input is a run's initial_data.
type Input struct {
	Limit       int   `json:"limit"`
	OlderThanMs int64 `json:"older_than_ms"`
}

// Output is the seed's Result, and nothing else.
type Output struct {
	OlderThanMs int64      `json:"older_than_ms"`
	Swept       int        `json:"swept"`
	Runs        []SweptRun `json:"runs"`
}

// SweptRun is one abandoned invocation in the output.
type SweptRun struct {
	RunID       string `json:"run_id"`
	ExtensionID string `json:"extension_id"`
	TenantID    string `json:"tenant_id"`
	JobName     string `json:"job_name"`
	Background  bool   `json:"background"`
	IdleMs      int64  `json:"idle_ms"`
}

// Stats are what a run did not do, for the run record and the summary log.
type Stats struct {
	Scanned int `json:"scanned"` // idle runs read, malformed ones included
	agesweep.Steps
	Moved    int `json:"moved"`    // moved (or finished) after the scan: left alone
	NotIdle  int `json:"not_idle"` // no longer past the deadline
	Errored  int `json:"errored"`  // transaction failed: nothing written
	Deferred int `json:"deferred"` // not attempted: budget spent
	// Paused counts the idle runs left because the sweep was paused fleet-wide while it ran.
	Paused                int    `json:"paused"`
	InterlocksReleased    int    `json:"interlocks_released"`
	InterlocksHeldByOther int    `json:"interlocks_held_by_other"` // left alone, logged
	Deadline              string `json:"deadline"`
	OutOfBudget           bool   `json:"out_of_budget"`
}
