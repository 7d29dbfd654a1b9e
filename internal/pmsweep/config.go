package pmsweep

import (
	"cmp"

	"github.com/stalesweep/stalesweep/internal/agesweep"
)

// Input defaults, as the seed gives them.
const (
	QueueDefault     = "default"
	TTLDefault       = 300
	ReclaimerDefault = "stalesweep"
)

// Outcomes a reclaimed task's log line names (the row_settled event's outcome field).
const (
	OutcomeReclaimed = "reclaimed"
	OutcomePoisoned  = "poisoned"
)

// Defaults of Config.
const (
	MaxReclaimsDefault = 5    // reclaims of one task before it is failed as poison
	MaxStaleDefault    = 1000 // stale tasks handled per run; the rest wait for the next
	PageSizeDefault    = 200
	ConcurrencyDefault = agesweep.ConcurrencyDefault
	BudgetDefault      = agesweep.BudgetDefault
	// TTLFloorDefault is the least ttl, in seconds, a sweep started off the command line
	// accepts: with heartbeats every TTL/3, a smaller one reclaims tasks whose workers are alive.
	TTLFloorDefault = 60
)

// Config tunes the sweep. Zero values take the defaults.
type Config struct {
	MaxReclaims int64
	MaxStale    int
	PageSize    int
	// TTLFloor is the least ttl (seconds) a run not started from the command accepts.
	TTLFloor int64
	// Bounds' storm guard tells a stall of the store or the network from a queue of dead workers.
	agesweep.Bounds
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.MaxReclaims = cmp.Or(c.MaxReclaims, MaxReclaimsDefault)
	c.MaxStale = cmp.Or(c.MaxStale, MaxStaleDefault)
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.TTLFloor = cmp.Or(c.TTLFloor, TTLFloorDefault)
	c.Bounds = c.Bounds.WithDefaults()
	return c
}

// Input is a run's initial_data: the seed's flags.
type Input struct {
	Queue     string `json:"queue"`
	TTL       int64  `json:"ttl"`
	Reclaimer string `json:"reclaimer"`
	DryRun    bool   `json:"dry_run"`
}

// Output is the seed's output.
type Output struct {
	Scanned   int64       `json:"scanned"`
	Stale     int         `json:"stale"`
	Reclaimed []Reclaimed `json:"reclaimed"`
	Raced     []Raced     `json:"raced"`
	// Poisoned lists the tasks failed as poison instead of requeued (beyond the seed).
	Poisoned []Reclaimed `json:"poisoned,omitempty"`
	DryRun   bool        `json:"dry_run"`
	TTL      int64       `json:"ttl"`
	// Warnings says when the queue's silences come close to the TTL (beyond the seed).
	Warnings []string `json:"warnings,omitempty"`
}

// Reclaimed is one reclaimed (or, in a dry run, reclaimable) task.
type Reclaimed struct {
	Task             string `json:"task"`
	Slug             string `json:"slug"`
	AgeSeconds       int64  `json:"age_seconds"`
	LastActivity     string `json:"last_activity"`
	ReclaimStatusSHA string `json:"reclaim_status_sha"`
}

// Raced is one task the sweep targeted but left: its worker was alive after all.
type Raced struct {
	Task         string `json:"task"`
	Slug         string `json:"slug"`
	AgeSeconds   int64  `json:"age_seconds"`
	LastActivity string `json:"last_activity"`
}

// Stats are what the run did not do, for the run record.
type Stats struct {
	Poisoned int `json:"poisoned"` // failed instead of requeued (over MaxReclaims)
	agesweep.Steps
	NearTTL  int            `json:"near_ttl"`  // working, silent for more than 2/3 of the TTL, not stale yet
	RacedWhy map[string]int `json:"raced_why"` // why each raced task was left
	Errored  int            `json:"errored"`   // reclaim transaction failed: nothing written
	Deferred int            `json:"deferred"`  // stale, not handled: MaxStale or budget
	// Paused counts the stale tasks left because the sweep was paused while it ran.
	Paused      int  `json:"paused"`
	Capped      bool `json:"capped"` // more stale tasks than MaxStale
	OutOfBudget bool `json:"out_of_budget"`
}
