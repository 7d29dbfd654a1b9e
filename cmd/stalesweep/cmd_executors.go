package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// cmdExecutors is `stalesweep executors list` and `stalesweep executors clear TARGET`: what the
// blind-executor guard judged, and the operator's clearance of a target after checking that its
// rows' executions really are gone (internal/blindguard).
func cmdExecutors(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: stalesweep executors list [--project P]\n       stalesweep executors clear TARGET [--project P]\n\n"+
			"TARGET is as list prints it: cloud_run:projects/P/locations/L or kubernetes:CLUSTER")
		return exitInvalid
	}
	if len(args) == 0 {
		return usage()
	}
	verb := args[0]
	fs := flag.NewFlagSet("executors "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	target, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return exitInvalid
	}
	switch {
	case verb == "list" && target == "":
	case verb == "clear" && target != "":
	default:
		return usage()
	}
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep executors: %v\n", err)
		return exitInvalid
	}
	if *project != "" {
		cfg.Project = *project
	}
	fsc, err := ledger.Open(ctx, ledger.Options{Project: cfg.Project, Database: cfg.Database})
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep executors: %v\n", err)
		return exitFailed
	}
	defer fsc.Close()
	store := ledger.NewTargetStore(fsc).WithRetention(cfg.Retention)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if verb == "list" {
		targets, err := store.List(ctx, 1000)
		if err != nil {
			fmt.Fprintf(stderr, "stalesweep executors: %v\n", err)
			return exitFailed
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // a reclaimer or a task named <&> prints as it is
		if targets == nil {
			targets = []ledger.Target{}
		}
		_ = enc.Encode(targets)
		return exitOK
	}
	// The clearance is stamped on Firestore's clock, as the rows' unknown spells are compared
	// with it wherever the functions run.
	now, err := ledger.ServerClock(fsc)(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep executors: %v\n", err)
		return exitFailed
	}
	if err := store.Clear(ctx, target, localActor(), now); err != nil {
		fmt.Fprintf(stderr, "stalesweep executors: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "stalesweep executors: cleared %s at %s: rows unknown to it since before now are taken as gone and settle lost after the grace; later NotFounds count against it again\n",
		target, now.UTC().Format(time.RFC3339))
	return exitOK
}
