package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// pmCmd is `stalesweep pm sweep`, the seed's command line for pm.sweep.
func (c *cli) pmCmd() *cobra.Command {
	var f runFlags
	var in pmsweep.Input
	sweep := &cobra.Command{
		Use:   "sweep [--queue Q] [--ttl SECONDS] [--reclaimer ID] [--dry-run]",
		Short: "reclaim zombie tasks of a queue (pm.sweep)",
		Long: `pm sweep reclaims the zombie tasks of a queue: working, and silent for more than --ttl
seconds. It prints the seed's output. It exits 0 whether or not anything was reclaimed or raced;
2 on invalid flags; 1 if the sweep could not run or the storm guard stopped it (the output is
printed either way); 3 when another sweep of the queue is running.`,
		Example: `  stalesweep pm sweep --queue default --ttl 300 --reclaimer ops --dry-run
  stalesweep pm sweep --queue builds --ttl 600 -o run`,
		Args: cobra.NoArgs,
	}
	sweep.Flags().StringVar(&in.Queue, "queue", pmsweep.QueueDefault, "the task queue to walk")
	sweep.Flags().Int64Var(&in.TTL, "ttl", pmsweep.TTLDefault, "seconds without activity after which a working task is stale")
	sweep.Flags().StringVar(&in.Reclaimer, "reclaimer", pmsweep.ReclaimerDefault, "who reclaims (recorded on the preempt heartbeat and the reclaim status)")
	f.add(sweep, "report what would be reclaimed without writing")
	sweep.RunE = func(cmd *cobra.Command, args []string) error {
		if f.format != formatOutput && f.format != formatRun {
			return c.usageError(cmd, "--output: want output or run, got %q", f.format)
		}
		// The seed's own --dry-run is its input's dry_run: its output says so, as the seed
		// defines. The engine runs it as a dry run too, so nothing at all is written.
		in.DryRun = f.dryRun
		input, _ := json.Marshal(in)
		if _, err := contract.Validate(contract.PMSweep, input); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep pm sweep: %v\n", err)
			return exitCode(exitInvalid)
		}
		code := c.startRun("pm sweep", f, workflow.Request{Type: contract.PMSweep, InitialData: input})
		if code == exitOK {
			// A queue with no task and no other run is most likely a typo: said after the run,
			// which has read nothing (scanned 0), so that a failed run is not delayed by it.
			if fsc, _, open := c.openFirestore("pm sweep", f.project); open == exitOK {
				c.warnUnknownScope("pm sweep", fsc, contract.PMSweep, in.Queue, map[bool]int{true: 0, false: 1}[f.dryRun], "nothing was there to sweep")
				fsc.Close()
			}
		}
		return exit(code)
	}
	return c.group("pm", "the task queues' commands (pm sweep)", "  stalesweep pm sweep --queue default --ttl 300 --dry-run", sweep)
}
