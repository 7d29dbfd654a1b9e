package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/testkit/bench"
)

func (c *cli) benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [--rows N] [--concurrency C] [--quick] [--out DIR]",
		Short: "measure throughput and cost against the emulators",
		Long: `bench measures cost and speed side by side against the emulators it starts (about 4.5
minutes; --quick about 35 s): a table as it goes, then DIR/bench.json and DIR/throughput.svg
(docs/performance.md).`,
		Example: `  stalesweep bench --quick --out /tmp/bench
  stalesweep bench --rows 2000 --concurrency 8`,
	}
	rows := cmd.Flags().Int("rows", 0, "rows settled in the throughput measurement (default 2000; 300 with --quick)")
	conc := cmd.Flags().Int("concurrency", 8, "concurrent syncs, and concurrent raw transactions")
	quick := cmd.Flags().Bool("quick", false, "every measurement small enough to finish in under a minute")
	out := cmd.Flags().String("out", "bench-out", "directory for bench.json and throughput.svg")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > 0:
			return c.usageError(cmd, "unexpected argument %q", args[0])
		case *rows < 0 || *rows > 100000:
			return c.usageError(cmd, "--rows: must be 1..100000 (0 for the default), got %d", *rows)
		case *conc < 1 || *conc > 64:
			return c.usageError(cmd, "--concurrency: must be 1..64, got %d", *conc)
		}
		if _, err := bench.Run(c.ctx, bench.Options{Rows: *rows, Concurrency: *conc, Quick: *quick, Out: c.stdout, Dir: *out}); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep bench: %v\n", err)
			return exitCode(exitFailed)
		}
		return nil
	}
	return cmd
}
