package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/auth"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
)

// A Setting is one environment variable: what the README's table says of it (its default, the
// values it takes, one line of what it does) and how ConfigFromEnv reads it. The table is the one
// list: ConfigFromEnv ranges over it and `stalesweep settings` writes the README's table from it.
type Setting struct {
	Name, Default, Values, Doc string
	read                       func(c *Config, name, v string) error
}

// Settings are read in this order; an empty value leaves its field zero (the default).
var Settings = []Setting{
	{EnvProject, "— (`" + EmulatorProjectLocal + "` against the emulator; else `" + EnvProjectFallback + "`)", "a project id", "project of the Firestore database",
		func(c *Config, _, v string) error { c.Project = v; return nil }},
	{EnvDatabase, "`(default)`", "a database id", "Firestore database id",
		func(c *Config, _, v string) error { c.Database = v; return nil }},
	{EnvFirestoreTimeout, dur(FirestoreTimeoutDefault), dur(FirestoreTimeoutMin) + " to " + dur(FirestoreTimeoutMax), "the first Firestore read a process makes, which tells an unreachable Firestore from a working one (the command then exits 1: `Firestore at HOST unreachable (after 10s): …`), each Firestore call a command makes, and, times three, the whole of a command that reads a few documents (a run adds its run budget)",
		func(c *Config, name, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < FirestoreTimeoutMin || d > FirestoreTimeoutMax {
				return fmt.Errorf("%s=%q: want a duration from %s to %s", name, v, FirestoreTimeoutMin, FirestoreTimeoutMax)
			}
			c.FirestoreTimeout = d
			return nil
		}},
	{EnvCloudRunEndpoint, "— (Cloud Run)", "loopback host:port", "the fake of the Executions API; plaintext, no auth",
		func(c *Config, _, v string) error { c.CloudRunEndpoint = v; return nil }},
	{EnvSyncConcurrency, strconv.Itoa(executionsync.ConcurrencyDefault), "1 to 256", "syncs in flight at once in one run",
		intInto(1, 256, func(c *Config, n int) { c.Sync.Concurrency = n })},
	{EnvLostGrace, dur(executionsync.LostGraceDefault), "a duration", "how long an execution may stay unknown to Cloud Run before the row is settled `lost`",
		durationInto(func(c *Config, d time.Duration) { c.Sync.LostGrace = d })},
	{EnvRunBudget, dur(executionsync.BudgetDefault), "a duration", "one run's budget; kept to 80% of `CLOUD_RUN_TIMEOUT_SECONDS` when the platform sets it",
		durationInto(func(c *Config, d time.Duration) { c.Sync.Budget = d })},
	{EnvExecutorTimeout, dur(executor.CallTimeoutDefault), "a duration", "each Cloud Run call",
		durationInto(func(c *Config, d time.Duration) { c.CloudRun.CallTimeout = d })},
	{EnvTxTimeout, dur(ledger.TxConfig{}.WithDefaults().Timeout), "a duration", "each settling transaction, all attempts",
		durationInto(func(c *Config, d time.Duration) { c.Tx.Timeout = d })},
	{EnvLogLevel, "info", "debug, info, warn or error", "the least severity logged (anything else is refused)",
		func(c *Config, name, v string) error {
			if _, err := logging.ParseLevelStrict(v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
			c.LogLevel = v
			return nil
		}},
	{EnvTopicTicks, pipeline.TicksDefault, "a topic id", "the pipeline's ticks topic",
		func(c *Config, _, v string) error { c.Topics.Ticks = v; return nil }},
	{EnvTopicSweeps, pipeline.SweepsDefault, "a topic id", "the pipeline's sweeps topic",
		func(c *Config, _, v string) error { c.Topics.Sweeps = v; return nil }},
	{EnvTopicSyncs, pipeline.SyncsDefault, "a topic id", "the pipeline's syncs topic",
		func(c *Config, _, v string) error { c.Topics.Syncs = v; return nil }},
	{EnvDispatchBudget, dur(pipeline.BudgetDefault), "a duration", "one Dispatch call",
		durationInto(func(c *Config, d time.Duration) { c.Dispatch.Budget = d })},
	{EnvRosterMaxAge, dur(pipeline.RosterMaxAgeDefault), "a duration up to " + dur(pipeline.RosterMaxAgeMax) + ", or off", "how long Dispatch reads the roster of enabled organizations before a tick lists them again; an organization that enables sweeps is swept from the next rebuild; `off`: every tick lists every organization (docs/operations.md)",
		func(c *Config, name, v string) error {
			if v == "off" {
				c.RosterMaxAge = -1
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > pipeline.RosterMaxAgeMax {
				return fmt.Errorf("%s=%q: want a positive duration up to %s, such as 10m, or off", name, v, pipeline.RosterMaxAgeMax)
			}
			c.RosterMaxAge = d
			return nil
		}},
	{EnvSyncBudget, dur(SyncBudgetDefault), "a duration", "one SyncExecution or ObserveExecution call",
		durationInto(func(c *Config, d time.Duration) { c.SyncBudget = d })},
	{EnvAuth, auth.ModeGoogle, auth.ModeGoogle + " or " + auth.ModeOff, "`google`: verify Google ID tokens on StartWorkflow; `off`: local use only (refused on Cloud Run and, by `serve`, on any address but loopback)",
		func(c *Config, name, v string) error {
			if v != auth.ModeGoogle && v != auth.ModeOff {
				return fmt.Errorf("%s=%q: want %q or %q (exactly)", name, v, auth.ModeGoogle, auth.ModeOff)
			}
			c.Auth.Mode = v
			return nil
		}},
	{EnvAuthAudience, "—", "comma-separated URLs", "the StartWorkflow function's own URLs, the audiences its tokens may carry (never taken from the request)",
		func(c *Config, _, v string) error { c.Auth.Audiences = list(v); return nil }},
	{EnvAllowedCallers, "—", "comma-separated", "callers allowed to call StartWorkflow: verified emails, and service accounts' numeric unique ids (a token minted without its email names only that)",
		func(c *Config, _, v string) error { c.Auth.Allowed = list(v); return nil }},
	{EnvAuthAcceptGcloud, "true", "true or false", "also accept gcloud's own ID tokens (`gcloud functions call`, `gcloud auth print-identity-token`), as Cloud Run's IAM does",
		func(c *Config, name, v string) error {
			if v != "true" && v != "false" {
				return fmt.Errorf("%s=%q: want true or false", name, v)
			}
			c.Auth.AcceptGcloud = v == "true"
			return nil
		}},
	{EnvRunsSweepFloorMs, strconv.Itoa(runssweep.ScheduledFloorMsDefault), "1 or more", "the least `older_than_ms` `platform.extension.runs.sweep` accepts off the command line",
		intInto(1, 1<<53-1, func(c *Config, n int) { c.RunsSweep.ScheduledFloorMs = int64(n) })},
	{EnvPMMaxReclaims, strconv.Itoa(pmsweep.MaxReclaimsDefault), "1 to 1000", "reclaims of one task before `pm.sweep` fails it as poison instead of requeueing it",
		intInto(1, 1000, func(c *Config, n int) { c.PMSweep.MaxReclaims = int64(n) })},
	{EnvPMTTLFloor, strconv.Itoa(pmsweep.TTLFloorDefault), "1 to 86400", "the least `ttl` `pm.sweep` accepts off the command line",
		intInto(1, 86400, func(c *Config, n int) { c.PMSweep.TTLFloor = int64(n) })},
	{EnvStormFraction, strconv.FormatFloat(storm.FractionDefault, 'g', -1, 64), "above 0, at most 1 (1: off)", "the storm guard: the largest share of a scope's live rows one run may settle on age alone (1 turns it off; docs/operations.md)",
		func(c *Config, name, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return fmt.Errorf("%s=%q: want a fraction greater than 0 and at most 1 (1 turns the storm guard off)", name, v)
			}
			c.Storm.Fraction = f
			return nil
		}},
	{EnvStormMinRows, strconv.Itoa(storm.MinRowsDefault), "1 to 1000000", "the storm guard: rows one run may always settle on age alone, whatever the fraction",
		intInto(1, 1_000_000, func(c *Config, n int) { c.Storm.MinRows = int64(n) })},
	{EnvBlindFraction, strconv.FormatFloat(blindguard.FractionDefault, 'g', -1, 64), "above 0, below 1", "the blind-executor guard: an executor target is blind when more than this share of the rows it answered about (fleet-wide) are unknown to it; no row of a blind target is settled `lost` (docs/operations.md)",
		func(c *Config, name, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f < 1) {
				return fmt.Errorf("%s=%q: want a fraction greater than 0 and less than 1", name, v)
			}
			c.Blind.Fraction = f
			return nil
		}},
	{EnvBlindMinRows, strconv.Itoa(blindguard.MinRowsDefault), "1 to 1000000", "the blind-executor guard: a target that answered about fewer rows is never judged blind",
		intInto(1, 1_000_000, func(c *Config, n int) { c.Blind.MinRows = int64(n) })},
	{EnvBlindWindow, dur(blindguard.WindowDefault), "a duration", "the blind-executor guard: the rows a target answered about within this long count",
		durationInto(func(c *Config, d time.Duration) { c.Blind.Window = d })},
	{EnvKubeClusters, "—", "inline JSON or a file path", "the Kubernetes clusters, inline JSON or a file path (docs/operations.md)",
		func(c *Config, _, v string) error { c.KubeClusters = v; return nil }},
	{EnvKubeQPS, strconv.FormatFloat(float64(kubejobs.QPSDefault), 'g', -1, 32), "-1 (no limit) to 10000", "client-go's client-side rate limit per Kubernetes cluster (-1 turns it off)",
		intInto(-1, 10_000, func(c *Config, n int) { c.KubeQPS = n })},
	{EnvKubeBurst, strconv.Itoa(kubejobs.BurstDefault), "1 to 10000", "client-go's burst per Kubernetes cluster",
		intInto(1, 10_000, func(c *Config, n int) { c.KubeBurst = n })},
	{EnvKubeClientRetries, "0", "0 to 10", "client-go's own retries per request; 0 leaves every retry to the adapter's policy (3 attempts, Unavailable only), so a 429 stops the run's calls at once",
		intInto(0, 10, func(c *Config, n int) { c.KubeClientRetries = n })},
	{EnvRetention, days(ledger.Retention{}.WithDefaults().Ordinary), "whole days (`30d`) or a Go duration, at least a day", "how long stalesweep keeps its own bookkeeping (run records, receipts, guards, judgments, the roster) after the write that decided it: a month of runs for incident reviews and reports, Pub/Sub's longest redelivery four times over (docs/data-model.md)",
		daysInto(func(c *Config, d time.Duration) { c.Retention.Ordinary = d })},
	{EnvRetentionNotable, days(ledger.Retention{}.WithDefaults().Notable), "as `STALESWEEP_RETENTION`, at least as long", "the same for runs that failed, settled a row `lost` or were held back by a guard (storm, blind executor), and for blind targets: the evidence a postmortem wants months later",
		daysInto(func(c *Config, d time.Duration) { c.Retention.Notable = d })},
	{EnvPlatformTimeout, "— (set by the platform)", "1 to 86400", "the function's own timeout in seconds; every budget is kept to 80% of it",
		intInto(1, 86400, func(c *Config, n int) { c.PlatformTimeout = time.Duration(n) * time.Second })},
	{EnvCloudRunService, "— (set by the platform)", "any", "present on Cloud Run: `STALESWEEP_AUTH=off` is refused",
		func(c *Config, _, v string) error { c.Auth.OnCloudRun = true; return nil }},
}

func intInto(lo, hi int, set func(*Config, int)) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%s=%q: want an integer from %d to %d", name, v, lo, hi)
		}
		set(c, n)
		return nil
	}
}

func durationInto(set func(*Config, time.Duration)) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 90s or 15m", name, v)
		}
		set(c, d)
		return nil
	}
}

// daysInto reads a positive duration in Go's syntax or in whole days ("30d").
func daysInto(set func(*Config, time.Duration)) func(*Config, string, string) error {
	return func(c *Config, name, v string) error {
		if days, ok := strings.CutSuffix(v, "d"); ok {
			n, err := strconv.Atoi(days)
			if err != nil || n <= 0 || n > 100*365 {
				return fmt.Errorf("%s=%q: want a whole number of days from 1 to 36500, such as 30d, or a duration such as 720h", name, v)
			}
			set(c, time.Duration(n)*24*time.Hour)
			return nil
		}
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			set(c, d)
			return nil
		}
		return fmt.Errorf("%s=%q: want a positive duration such as 720h, or whole days such as 30d", name, v)
	}
}

func days(d time.Duration) string { return fmt.Sprintf("%dd", d/(24*time.Hour)) }

// dur prints a duration as an operator writes it: 15m, not 15m0s.
func dur(d time.Duration) string {
	s := d.String()
	for _, zero := range []string{"0s", "0m"} {
		if t, ok := strings.CutSuffix(s, zero); ok && t != "" && !strings.HasSuffix(t, ".") && (strings.HasSuffix(t, "m") || strings.HasSuffix(t, "h")) {
			s = t
		}
	}
	return s
}
