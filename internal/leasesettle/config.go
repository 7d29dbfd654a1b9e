package leasesettle

import (
	"cmp"

	"github.com/stalesweep/stalesweep/internal/agesweep"
)

// Input defaults and bounds.
const (
	MaxSettlementsDefault = 50
	MaxSettlementsMax     = 500
)

// Defaults of Config.
const (
	MaxExaminedDefault = 5000 // active leases read per run at most
	PageSizeDefault    = 200
	ConcurrencyDefault = agesweep.ConcurrencyDefault
	BudgetDefault      = agesweep.BudgetDefault
)

// Config tunes the workflow. Zero values take the defaults.
type Config struct {
	MaxExamined int
	PageSize    int
	// Bounds' storm guard limits abandonment on heartbeat age alone; leases whose holder is
	// terminal are exempt.
	agesweep.Bounds
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.MaxExamined = cmp.Or(c.MaxExamined, MaxExaminedDefault)
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.Bounds = c.Bounds.WithDefaults()
	return c
}

// Input is a run's initial_data.
type Input struct {
	OrganizationUUID string `json:"organization_uuid"`
	RunnerGroupUUID  string `json:"runner_group_uuid"`
	MaxSettlements   int    `json:"max_settlements"`
}

// Output is the part of seed 004's output the workflow fills; the engine adds the rest.
type Output struct {
	RunnerGroupUUID         string       `json:"runner_group_uuid"`
	OrganizationUUID        string       `json:"organization_uuid"`
	Outcome                 string       `json:"outcome"` // OutcomeSettled, OutcomeNothingToSettle, or in a dry run OutcomeWouldSettle
	Reason                  string       `json:"reason"`  // the run in a sentence
	Examined                int          `json:"examined"`
	Settled                 int          `json:"settled"`
	Settlements             []Settlement `json:"settlements"`
	HeartbeatTimeoutSeconds int64        `json:"heartbeat_timeout_seconds"`
	MaxSettlements          int          `json:"max_settlements"`
}

// Outcomes of a run (the output's outcome, a string in seed 004).
const (
	OutcomeSettled         = "settled"           // abandoned at least one lease
	OutcomeNothingToSettle = "nothing_to_settle" // abandoned none (in a dry run: would abandon none)
	OutcomeWouldSettle     = "would_settle"      // a dry run that would abandon at least one
)

// Settlement is one abandoned lease.
type Settlement struct {
	LeaseUUID           string `json:"lease_uuid"`
	WorkspaceID         string `json:"workspace_id"`
	HolderUUID          string `json:"holder_runner_instance_uuid"`
	HolderStatus        string `json:"holder_status,omitempty"` // empty when unresolvable
	Reason              string `json:"reason"`
	HeartbeatAgeSeconds int64  `json:"heartbeat_age_seconds"`
}

// Stats are what the run did not do.
type Stats struct {
	Kept map[string]int `json:"kept"` // by why
	agesweep.Steps
	Raced int `json:"raced"` // changed between scan and transaction: kept
	// Refused counts, by rule, leases the run was not allowed to write (leasesettle.Refuse).
	Refused     map[string]int `json:"refused,omitempty"`
	Errored     int            `json:"errored"`       // transaction failed: nothing written
	OverBudget  int            `json:"over_budget"`   // abandonable, left for the next run (max_settlements)
	ScanCapped  bool           `json:"scan_capped"`   // stopped at MaxExamined
	OutOfBudget bool           `json:"out_of_budget"` // the time budget ran out
}
