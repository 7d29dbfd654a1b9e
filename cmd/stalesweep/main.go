// Command stalesweep runs stalesweep's workflows from an operator's shell, serves its functions
// locally, runs the demo, and serves the Cloud Run fake.
//
//	stalesweep run WORKFLOW_TYPE --data '{...initial_data...}' [--include-disabled] [--override-storm-guard]
//	                                                            one run inline; output JSON on stdout
//	stalesweep pm sweep [--queue Q] [--ttl S] [--reclaimer ID] [--dry-run] [--override-storm-guard]
//	stalesweep demo [--pipeline]                                the main job on a fresh machine
//	stalesweep serve [--addr 127.0.0.1:8080]                    the function targets, locally
//	stalesweep fake-cloudrun --addr 127.0.0.1:PORT --executions FILE
//	stalesweep indexes [--check] [--root DIR]                   write or check the generated index files
//	stalesweep indexes --gcloud --project P [--database D]      the gcloud commands that create them
//	stalesweep bench [--rows N] [--concurrency C] [--quick] [--out DIR]
//	stalesweep executors list | clear TARGET                   the blind-executor guard's judgments
//
// Exit codes: 0 success (a run that completed); 1 a run that failed, or an error; 2 invalid
// input or usage, a bad setting, or an organization that opted out of sweeps (without
// --include-disabled).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1
	exitInvalid = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: stalesweep COMMAND [flags]

commands:
  run WORKFLOW_TYPE --data JSON [--include-disabled] [--override-storm-guard]
                                  run one workflow inline; prints its output JSON
  pm sweep [--queue Q] [--ttl S] [--reclaimer ID] [--dry-run] [--override-storm-guard]
                                  reclaim zombie tasks of a queue (pm.sweep)
  demo                            seed the emulator, sweep until nothing stale remains, summarize
  serve                           serve the function targets locally (functions framework)
  bench [--rows N] [--concurrency C] [--quick] [--out DIR]
                                  measure throughput and cost against the emulators
  fake-cloudrun                   serve the Cloud Run Executions fake
  executors list | clear TARGET   what the blind-executor guard judged; clear a target after checking
  indexes [--check] [--gcloud --project P]
                                  write or check the index files, or print gcloud commands

"stalesweep COMMAND -h" describes a command's flags.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitInvalid
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, rest, stdin, stdout, stderr)
	case "demo":
		return cmdDemo(ctx, rest, stdout, stderr)
	case "serve":
		return cmdServe(ctx, rest, stderr)
	case "pm":
		return cmdPM(ctx, rest, stdout, stderr)
	case "bench":
		return cmdBench(ctx, rest, stdout, stderr)
	case "fake-cloudrun":
		return cmdFakeCloudRun(ctx, rest, stdout, stderr)
	case "indexes":
		return cmdIndexes(rest, stdout, stderr)
	case "executors":
		return cmdExecutors(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "stalesweep: unknown command %q\n\n%s", cmd, usage)
		return exitInvalid
	}
}
