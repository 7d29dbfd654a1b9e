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
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// cmdPM is `stalesweep pm sweep`, the seed's command line for pm.sweep. It exits 0 whether or
// not anything was reclaimed or raced; 2 on invalid flags; 1 if the sweep could not run or the
// storm guard stopped it (the output is printed either way).
func cmdPM(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "sweep" {
		fmt.Fprintln(stderr, "usage: stalesweep pm sweep [--queue Q] [--ttl SECONDS] [--reclaimer ID] [--dry-run] [--override-storm-guard]")
		return exitInvalid
	}
	fs := flag.NewFlagSet("pm sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.String("queue", pmsweep.QueueDefault, "the task queue to walk")
	ttl := fs.Int64("ttl", pmsweep.TTLDefault, "seconds without activity after which a working task is stale")
	reclaimer := fs.String("reclaimer", pmsweep.ReclaimerDefault, "who reclaims (recorded on the preempt heartbeat and the reclaim status)")
	dryRun := fs.Bool("dry-run", false, "report what would be reclaimed without writing")
	project := fs.String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	override := fs.Bool("override-storm-guard", false, "reclaim even when the storm guard would stop the sweep: only after checking that the workers really are gone")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	input, _ := json.Marshal(pmsweep.Input{Queue: *queue, TTL: *ttl, Reclaimer: *reclaimer, DryRun: *dryRun})
	if _, err := contract.Validate(contract.PMSweep, input); err != nil {
		fmt.Fprintf(stderr, "stalesweep pm sweep: %v\n", err)
		return exitInvalid
	}
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep pm sweep: %v\n", err)
		return exitInvalid
	}
	if *project != "" {
		cfg.Project = *project
	}
	a, err := app.New(ctx, cfg, logging.New(stderr, logging.ParseLevel(cfg.LogLevel)), time.Now, app.Parts{})
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep pm sweep: %v\n", err)
		return exitFailed
	}
	defer a.Close()
	if *override {
		fmt.Fprintln(stderr, "stalesweep pm sweep: the storm guard is overridden for this sweep (--override-storm-guard)")
	}
	out, err := a.Engine.Start(ctx, workflow.Request{Type: contract.PMSweep, InitialData: input, Trigger: workflow.TriggerLocal,
		Actor: localActor(), ClaimedActor: os.Getenv(envActor), StormOverride: *override})
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep pm sweep: %v\n", err)
		if workflow.IsValidation(err) {
			return exitInvalid
		}
		return exitFailed
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a reclaimer or a task named <&> prints as it is
	_ = enc.Encode(out.Output)
	if out.Status != workflow.StateCompleted {
		fmt.Fprintf(stderr, "stalesweep pm sweep: run %s failed: %v\n", out.RunUUID, out.Err)
		return exitFailed
	}
	return exitOK
}
