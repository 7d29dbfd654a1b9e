package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/stalesweep/stalesweep/internal/bench"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rows := fs.Int("rows", 0, "rows settled in the throughput measurement (default 2000; 300 with --quick)")
	conc := fs.Int("concurrency", 8, "concurrent syncs, and concurrent raw transactions")
	quick := fs.Bool("quick", false, "every measurement small enough to finish in under a minute")
	out := fs.String("out", "bench-out", "directory for bench.json and throughput.svg")
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	var bad string
	switch {
	case fs.NArg() > 0:
		bad = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case *rows < 0 || *rows > 100000:
		bad = fmt.Sprintf("--rows: must be 1..100000 (0 for the default), got %d", *rows)
	case *conc < 1 || *conc > 64:
		bad = fmt.Sprintf("--concurrency: must be 1..64, got %d", *conc)
	}
	if bad != "" {
		fmt.Fprintf(stderr, "stalesweep bench: %s\n", bad)
		return exitInvalid
	}
	if _, err := bench.Run(ctx, bench.Options{Rows: *rows, Concurrency: *conc, Quick: *quick, Out: stdout, Dir: *out}); err != nil {
		fmt.Fprintf(stderr, "stalesweep bench: %v\n", err)
		return exitFailed
	}
	return exitOK
}
