package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/auth"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
)

// Environment variables a process reads its configuration from. Durations use Go's syntax
// ("90s", "15m").
const (
	EnvProject           = "GOOGLE_CLOUD_PROJECT"
	EnvDatabase          = "STALESWEEP_FIRESTORE_DATABASE"
	EnvFirestoreTimeout  = "STALESWEEP_FIRESTORE_TIMEOUT"
	EnvCloudRunEndpoint  = cloudrun.EndpointEnv
	EnvSyncConcurrency   = "STALESWEEP_SYNC_CONCURRENCY"
	EnvLostGrace         = "STALESWEEP_LOST_GRACE"
	EnvRunBudget         = "STALESWEEP_RUN_BUDGET"
	EnvExecutorTimeout   = "STALESWEEP_EXECUTOR_TIMEOUT"
	EnvTxTimeout         = "STALESWEEP_TX_TIMEOUT"
	EnvLogLevel          = "STALESWEEP_LOG_LEVEL"
	EnvTopicTicks        = "STALESWEEP_TOPIC_TICKS"
	EnvTopicSweeps       = "STALESWEEP_TOPIC_SWEEPS"
	EnvTopicSyncs        = "STALESWEEP_TOPIC_SYNCS"
	EnvDispatchBudget    = "STALESWEEP_DISPATCH_BUDGET"
	EnvRosterMaxAge      = "STALESWEEP_ROSTER_MAX_AGE"
	EnvSyncBudget        = "STALESWEEP_SYNC_BUDGET"
	EnvAuth              = "STALESWEEP_AUTH"
	EnvAuthAudience      = "STALESWEEP_AUTH_AUDIENCE"
	EnvAllowedCallers    = "STALESWEEP_ALLOWED_CALLERS"
	EnvAuthAcceptGcloud  = "STALESWEEP_AUTH_ACCEPT_GCLOUD"
	EnvPMTTLFloor        = "STALESWEEP_PM_TTL_FLOOR_SECONDS"
	EnvKubeClusters      = "STALESWEEP_KUBE_CLUSTERS"
	EnvKubeQPS           = "STALESWEEP_KUBE_QPS"
	EnvKubeBurst         = "STALESWEEP_KUBE_BURST"
	EnvKubeClientRetries = "STALESWEEP_KUBE_CLIENT_RETRIES"
	EnvBlindFraction     = "STALESWEEP_BLIND_FRACTION"
	EnvBlindMinRows      = "STALESWEEP_BLIND_MIN_ROWS"
	EnvBlindWindow       = "STALESWEEP_BLIND_WINDOW"
	EnvCloudRunService   = "K_SERVICE" // set by the platform on Cloud Run and gen2 functions
	EnvRunsSweepFloorMs  = "STALESWEEP_EXTENSION_SWEEP_FLOOR_MS"
	EnvPMMaxReclaims     = "STALESWEEP_PM_MAX_RECLAIMS"
	EnvStormFraction     = "STALESWEEP_STORM_FRACTION"
	EnvStormMinRows      = "STALESWEEP_STORM_MIN_ROWS"
	EnvRetention         = "STALESWEEP_RETENTION"
	EnvRetentionNotable  = "STALESWEEP_RETENTION_NOTABLE"
	EnvPlatformTimeout   = "CLOUD_RUN_TIMEOUT_SECONDS" // set by the platform on gen2 functions
	EnvProjectFallback   = "GCLOUD_PROJECT"
	EmulatorProjectLocal = "stalesweep-local" // the project used against the emulator when none is named
)

// FirestoreTimeoutDefault bounds the first Firestore read a process makes (which tells an
// unreachable Firestore from a slow one) and, in the command, every Firestore call without a
// deadline of its own. FirestoreTimeoutMin and FirestoreTimeoutMax bound the setting.
const (
	FirestoreTimeoutDefault = 10 * time.Second
	FirestoreTimeoutMin     = time.Second
	FirestoreTimeoutMax     = 5 * time.Minute
)

// Config is everything a process needs to build its dependencies.
type Config struct {
	Project  string
	Database string
	// FirestoreTimeout is STALESWEEP_FIRESTORE_TIMEOUT, with the default filled in.
	FirestoreTimeout time.Duration
	CloudRunEndpoint string // host:port of a local fake; empty means Cloud Run
	Sync             executionsync.Config
	CloudRun         cloudrun.Config
	Tx               ledger.TxConfig
	LogLevel         string
	// PlatformTimeout is the function's own timeout, when the platform says; budgets stay below it.
	PlatformTimeout time.Duration
	Topics          pipeline.Topics
	Dispatch        pipeline.DispatchConfig
	// RosterMaxAge: 0 takes pipeline.RosterMaxAgeDefault; negative: no roster, every tick lists.
	RosterMaxAge time.Duration
	// SyncBudget bounds one SyncExecution call (one executor call and one transaction).
	SyncBudget  time.Duration
	Auth        auth.Config
	RunsSweep   runssweep.Config
	PMSweep     pmsweep.Config
	LeaseSettle leasesettle.Config
	// Storm is the storm guard New gives every workflow that settles on age alone (declared.bounds).
	Storm storm.Config
	// KubeClusters is STALESWEEP_KUBE_CLUSTERS: inline JSON or a file path (see kubejobs).
	KubeClusters string
	// KubeQPS, KubeBurst and KubeClientRetries are kubejobs.ClientConfig's, per cluster.
	KubeQPS, KubeBurst, KubeClientRetries int
	// Blind configures the blind-executor guard of the execution-sync workflows.
	Blind blindguard.Config
	// Retention is how long stalesweep's own bookkeeping is kept (ledger.Retention).
	Retention ledger.Retention
}

// ConfigFromEnv reads a Config from the settings table. A malformed value is an error naming the
// variable; an absent one leaves the field zero, which takes the default downstream.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{FirestoreTimeout: FirestoreTimeoutDefault, Auth: auth.Config{AcceptGcloud: true}}
	for _, s := range Settings {
		if v := getenv(s.Name); v != "" {
			if err := s.read(&c, s.Name, v); err != nil {
				return Config{}, err
			}
		}
	}
	c.Project = firstNonEmpty(c.Project, getenv(EnvProjectFallback))
	if c.Project == "" && getenv(firestoreconn.EmulatorEnv) != "" {
		c.Project = EmulatorProjectLocal
	}
	c.Topics = c.Topics.WithDefaults()
	if c.Auth.Mode == auth.ModeOff && c.Auth.OnCloudRun {
		return Config{}, fmt.Errorf("%s=off is for local use only and is refused on Cloud Run (%s is set)", EnvAuth, EnvCloudRunService)
	}
	r, notableDefault := c.Retention, (ledger.Retention{}).WithDefaults().Notable
	if r.Notable == 0 && r.Ordinary > notableDefault {
		return Config{}, fmt.Errorf("%s=%q: longer than %s's default (%s); set %s too, at least as long", EnvRetention, getenv(EnvRetention),
			EnvRetentionNotable, notableDefault, EnvRetentionNotable)
	}
	if err := r.Validate(EnvRetention, EnvRetentionNotable); err != nil {
		return Config{}, err
	}
	c.Retention = r.WithDefaults()
	return c, nil
}

// Check reports, naming the variable, what this configuration cannot do that building the
// dependencies would otherwise find only on first use: the clusters of STALESWEEP_KUBE_CLUSTERS
// and, when the process serves StartWorkflow (http), its authentication. It makes no network call.
func (c Config) Check(http bool) error {
	if _, err := kubernetesExecutor(c); err != nil {
		return err // kubejobs.ParseClusters names the variable
	}
	if c.CloudRunEndpoint != "" {
		if err := cloudrun.RequireLoopback(c.CloudRunEndpoint); err != nil {
			return fmt.Errorf("%s: %w", EnvCloudRunEndpoint, err)
		}
	}
	if http {
		return c.Auth.Check()
	}
	return nil
}

func list(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// budget returns the run budget: the configured one (or the default), kept to 80% of the
// platform's timeout when that is known, so a run always stops before the platform kills it.
func (c Config) budget() time.Duration { return c.within(c.Sync.Budget, executionsync.BudgetDefault) }

// RunBudget is the run budget every workflow run is held to (budget).
func (c Config) RunBudget() time.Duration { return c.budget() }

func (c Config) within(d, def time.Duration) time.Duration {
	if d == 0 {
		d = def
	}
	if c.PlatformTimeout > 0 {
		d = min(d, c.PlatformTimeout*8/10)
	}
	return d
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
