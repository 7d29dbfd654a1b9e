package executionsync

import (
	"cmp"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Input defaults and bounds, as the seed gives them; the input schema carries the same numbers
// and a test holds them equal.
const (
	LimitDefault         = 25
	LimitMax             = 200
	MinAgeSecondsDefault = 60
)

// Defaults of Config.
const (
	ConcurrencyDefault = 8
	LostGraceDefault   = 15 * time.Minute
	BudgetDefault      = 4 * time.Minute
	ScanFactorDefault  = 4
	MaxErrorsDefault   = 50
)

// Config tunes the workflow. Zero values take the defaults.
type Config struct {
	// Provider is the provider value of the rows this workflow syncs (ledger.ProviderCloudRun).
	Provider string
	// Concurrency is how many syncs run at once inline.
	Concurrency int
	// LostGrace is how long sync.unknown_since may age before the row is settled "lost".
	LostGrace time.Duration
	// Budget bounds one run, scan and syncs together; it stays below the function timeout.
	Budget time.Duration
	// ScanFactor bounds the documents one run reads to ScanFactor × limit, so rows without a
	// provider reference (which stay stale forever) cannot make a scan unbounded.
	ScanFactor int
	// MaxErrors bounds the per-row errors kept in a run's stats.
	MaxErrors int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.LostGrace = cmp.Or(c.LostGrace, LostGraceDefault)
	c.Budget = cmp.Or(c.Budget, BudgetDefault)
	c.ScanFactor = cmp.Or(c.ScanFactor, ScanFactorDefault)
	c.MaxErrors = cmp.Or(c.MaxErrors, MaxErrorsDefault)
	return c
}

// Validate reports a setting no run could work with.
func (c Config) Validate() error {
	switch {
	case c.Provider == "":
		return fmt.Errorf("executionsync config: provider is empty")
	case c.Concurrency < 1:
		return fmt.Errorf("executionsync config: concurrency %d must be at least 1", c.Concurrency)
	case c.LostGrace < 0:
		return fmt.Errorf("executionsync config: lost grace %s must not be negative", c.LostGrace)
	case c.Budget <= 0:
		return fmt.Errorf("executionsync config: budget %s must be positive", c.Budget)
	case c.ScanFactor < 1:
		return fmt.Errorf("executionsync config: scan factor %d must be at least 1", c.ScanFactor)
	}
	return nil
}

// Input is a run's initial_data, validated and with defaults applied.
type Input struct {
	OrganizationUUID string `json:"organization_uuid"`
	Limit            int    `json:"limit"`
	MinAgeSeconds    int64  `json:"min_age_seconds"`
}

// Output is a run's output, with the seed's field names. The engine adds completed_at or
// failed_at and the failure fields.
type Output struct {
	OrganizationUUID            string   `json:"organization_uuid"`
	Limit                       int      `json:"limit"`
	MinAgeSeconds               int64    `json:"min_age_seconds"`
	CandidateCount              int      `json:"candidate_count"`
	StartedCount                int      `json:"started_count"`
	SkippedMissingMetadataCount int      `json:"skipped_missing_metadata_count"`
	FailedStartCount            int      `json:"failed_start_count"`
	StartedRunnerExecutionUUIDs []string `json:"started_runner_execution_uuids"`
	FailedRunnerExecutionUUIDs  []string `json:"failed_runner_execution_uuids"`
}

// Stats are what a run did and did not do, beyond the seed's output.
type Stats struct {
	Scanned int `json:"scanned"` // documents the scan read
	// Invisible counts the scope's active rows no scan can see (ledger.Invisible): never settled.
	Invisible *ledger.Invisible `json:"invisible,omitempty"`
	Settled   map[string]int    `json:"settled"`   // rows settled, by outcome
	Refreshed int               `json:"refreshed"` // still running: observed_at moved on
	Unknown   int               `json:"unknown"`   // not found, within the grace
	// Blind counts, by target, the unknown rows past the grace the blind-executor guard held back.
	Blind    map[string]int `json:"blind,omitempty"`
	Raced    int            `json:"raced"`             // changed since the scan: left alone
	Refused  map[string]int `json:"refused,omitempty"` // not the run's to write, by rule: left alone
	Errored  int            `json:"errored"`           // executor or Firestore error: nothing settled
	Deferred int            `json:"deferred"`          // not started: executor stopped or budget spent
	// Malformed counts undecodable rows (also counted as missing metadata), with a sample of paths.
	Malformed   *workflow.Malformed `json:"malformed,omitempty"`
	ScanCapped  bool                `json:"scan_capped"`         // the scan stopped at its document cap
	StoppedBy   string              `json:"stopped_by"`          // why executor calls stopped early, if they did
	OutOfBudget bool                `json:"out_of_budget"`       // the run's budget ran out
	Published   int                 `json:"published,omitempty"` // syncs handed to the syncs topic (pipeline)
	Errors      []RowError          `json:"errors,omitempty"`    // the first MaxErrors per-row errors
	Skipped     []string            `json:"skipped,omitempty"`   // uuids skipped for missing metadata (first MaxErrors)
	// Preview is, in a dry run, what the run would have done; the counts above then stay empty.
	Preview *Preview `json:"preview,omitempty"`
}

// RowError is one row's failure.
type RowError struct {
	RunnerExecutionUUID string `json:"runner_execution_uuid"`
	Layer               string `json:"layer"`
	Code                string `json:"code"`
	Error               string `json:"error"`
}
