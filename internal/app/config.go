package app

import (
	"fmt"
	"strconv"
	"time"

	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Environment variables a process reads its configuration from. Durations use Go's syntax
// ("90s", "15m").
const (
	EnvProject           = "GOOGLE_CLOUD_PROJECT"
	EnvDatabase          = "STALESWEEP_FIRESTORE_DATABASE"
	EnvCloudRunEndpoint  = cloudrun.EndpointEnv
	EnvSyncConcurrency   = "STALESWEEP_SYNC_CONCURRENCY"
	EnvLostGrace         = "STALESWEEP_LOST_GRACE"
	EnvRunBudget         = "STALESWEEP_RUN_BUDGET"
	EnvExecutorTimeout   = "STALESWEEP_EXECUTOR_TIMEOUT"
	EnvTxTimeout         = "STALESWEEP_TX_TIMEOUT"
	EnvLogLevel          = "STALESWEEP_LOG_LEVEL"
	EnvPlatformTimeout   = "CLOUD_RUN_TIMEOUT_SECONDS" // set by the platform on gen2 functions
	EnvProjectFallback   = "GCLOUD_PROJECT"
	EmulatorProjectLocal = "stalesweep-local" // the project used against the emulator when none is named
)

// Config is everything a process needs to build its dependencies.
type Config struct {
	Project          string
	Database         string
	CloudRunEndpoint string // host:port of a local fake; empty means Cloud Run
	Sync             executionsync.Config
	CloudRun         cloudrun.Config
	Tx               ledger.TxConfig
	LogLevel         string
	// PlatformTimeout is the function's own timeout, when the platform says; a run's budget is
	// kept below it.
	PlatformTimeout time.Duration
}

// ConfigFromEnv reads a Config. A malformed value is an error naming the variable; an absent
// one leaves the field zero, which takes the default downstream.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Project:          firstNonEmpty(getenv(EnvProject), getenv(EnvProjectFallback)),
		Database:         getenv(EnvDatabase),
		CloudRunEndpoint: getenv(EnvCloudRunEndpoint),
		LogLevel:         getenv(EnvLogLevel),
	}
	if c.Project == "" && getenv(ledger.EmulatorEnv) != "" {
		c.Project = EmulatorProjectLocal
	}
	var err error
	if c.Sync.Concurrency, err = intVar(getenv, EnvSyncConcurrency, 1, 256); err != nil {
		return Config{}, err
	}
	if c.Sync.LostGrace, err = durationVar(getenv, EnvLostGrace); err != nil {
		return Config{}, err
	}
	if c.Sync.Budget, err = durationVar(getenv, EnvRunBudget); err != nil {
		return Config{}, err
	}
	if c.CloudRun.CallTimeout, err = durationVar(getenv, EnvExecutorTimeout); err != nil {
		return Config{}, err
	}
	if c.Tx.Timeout, err = durationVar(getenv, EnvTxTimeout); err != nil {
		return Config{}, err
	}
	secs, err := intVar(getenv, EnvPlatformTimeout, 1, 86400)
	if err != nil {
		return Config{}, err
	}
	c.PlatformTimeout = time.Duration(secs) * time.Second
	return c, nil
}

// budget returns the run budget: the configured one (or the default), kept to 80% of the
// platform's timeout when that is known, so a run always stops before the platform kills it.
func (c Config) budget() time.Duration {
	b := c.Sync.Budget
	if b == 0 {
		b = executionsync.BudgetDefault
	}
	if c.PlatformTimeout > 0 {
		b = min(b, c.PlatformTimeout*8/10)
	}
	return b
}

func intVar(getenv func(string) string, name string, lo, hi int) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

func durationVar(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 90s or 15m", name, v)
	}
	return d, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
