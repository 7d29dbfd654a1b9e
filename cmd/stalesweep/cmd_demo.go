package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stalesweep/stalesweep/internal/demo"
	"github.com/stalesweep/stalesweep/internal/logging"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("verbose", false, "also write the workflows' JSON logs to stderr")
	limit := fs.Int("limit", 50, "rows per workflow run (1..200)")
	viaPipeline := fs.Bool("pipeline", false, "run every round through the deployed shape: a tick on the Pub/Sub emulator → Dispatch → Sweep → SyncExecution")
	grace := fs.Duration("lost-grace", 3*time.Second, "how long an execution Cloud Run does not know stays unknown before it is settled lost")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	if *limit < 1 || *limit > 200 || *grace <= 0 {
		fmt.Fprintln(stderr, "stalesweep demo: --limit must be 1..200 and --lost-grace positive")
		return exitInvalid
	}
	var log *slog.Logger
	if *verbose {
		log = logging.New(stderr, slog.LevelInfo)
	}
	started := time.Now()
	if _, err := demo.Run(ctx, demo.Options{Out: stdout, Log: log, Verbose: *verbose, Limit: *limit, LostGrace: *grace, Pipeline: *viaPipeline}); err != nil {
		fmt.Fprintf(stderr, "stalesweep demo: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "demo finished in %s\n", time.Since(started).Round(100*time.Millisecond))
	return exitOK
}
