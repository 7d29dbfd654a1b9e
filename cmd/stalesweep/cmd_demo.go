package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/demo"
	"github.com/stalesweep/stalesweep/internal/logging"
)

func (c *cli) demoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo [--pipeline]",
		Short: "seed the emulator, sweep until nothing stale remains, summarize",
		Long: `demo starts the Firestore emulator (and, with --pipeline, the Pub/Sub emulator) and the
Cloud Run fake, seeds an organization with 240 runner executions covering every case plus a
second organization that must stay untouched, sweeps until nothing stale is left to settle, and
checks every row. It stops what it started.`,
		Example: `  stalesweep demo
  stalesweep demo --pipeline --verbose`,
		Args: cobra.NoArgs,
	}
	verbose := cmd.Flags().Bool("verbose", false, "also write the workflows' JSON logs to stderr")
	limit := cmd.Flags().Int("limit", 50, "rows per workflow run (1..200)")
	viaPipeline := cmd.Flags().Bool("pipeline", false, "run every round through the deployed shape: a tick on the Pub/Sub emulator → Dispatch → Sweep → SyncExecution")
	grace := cmd.Flags().Duration("lost-grace", 3*time.Second, "how long an execution Cloud Run does not know stays unknown before it is settled lost")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *limit < 1 || *limit > 200 || *grace <= 0 {
			return c.usageError(cmd, "--limit must be 1..200 and --lost-grace positive")
		}
		var log *slog.Logger
		if *verbose {
			log = logging.New(c.stderr, slog.LevelInfo)
		}
		started := time.Now()
		if _, err := demo.Run(c.ctx, demo.Options{Out: c.stdout, Log: log, Verbose: *verbose, Limit: *limit, LostGrace: *grace, Pipeline: *viaPipeline}); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep demo: %v\n", err)
			return exitCode(exitFailed)
		}
		fmt.Fprintf(c.stdout, "demo finished in %s\n", time.Since(started).Round(100*time.Millisecond))
		return nil
	}
	return cmd
}
