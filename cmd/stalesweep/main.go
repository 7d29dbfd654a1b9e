// Command stalesweep runs stalesweep's workflows from an operator's shell, serves its functions
// locally, runs the demo, and serves the Cloud Run fake. "stalesweep help" lists the commands;
// "stalesweep COMMAND --help" describes one, with an example. docs/operations.md lists the exit
// codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes (docs/operations.md, "Exit codes").
const (
	exitOK      = 0
	exitFailed  = 1 // a run that failed, or an error
	exitInvalid = 2 // invalid input or usage, a bad setting, a refused scope
	// exitConflict: another run holds the scope, or this run uuid already started.
	exitConflict = 3
	// exitNotFound: the row or run asked for does not exist.
	exitNotFound = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli is one invocation of the command: its streams, and the exit code a command chose.
type cli struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// exitCode is a command's chosen exit code, returned as an error so that cobra stops there; it
// has already said why on stderr.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exit turns a legacy command's exit code into RunE's error.
func exit(code int) error {
	if code == exitOK {
		return nil
	}
	return exitCode(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	root := c.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	default: // cobra's own: an unknown command or flag, a wrong number of arguments
		fmt.Fprintf(stderr, "stalesweep: %v\n", err)
		fmt.Fprintln(stderr, `Run "stalesweep --help" for usage.`)
		return exitInvalid
	}
}

// root is the command tree.
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "stalesweep",
		Short: "settle the stale state dead runners and workers leave behind",
		Long: `stalesweep settles the stale rows dead runners and workers leave in Firestore: it asks the
executor (Cloud Run, Kubernetes) what really happened and settles each row in its own transaction.`,
		Example: `  stalesweep demo
  stalesweep run runner.execution-sync-stale-cloud-run --data '{"organization_uuid": "..."}'`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Version:           versionString(),
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
		// No command: print the usage and exit 2, as for any usage error.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.stderr)
			_ = cmd.Usage()
			return exitCode(exitInvalid)
		},
	}
	root.SetVersionTemplate("stalesweep {{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(
		c.legacy("run WORKFLOW_TYPE --data JSON", "run one workflow inline; prints its output JSON",
			`  stalesweep run runner.execution-sync-stale-cloud-run --data '{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}'`,
			func(args []string) int { return cmdRun(c.ctx, args, c.stdin, c.stdout, c.stderr) }),
		c.legacy("pm sweep [--queue Q] [--ttl S] [--reclaimer ID] [--dry-run]", "reclaim zombie tasks of a queue (pm.sweep)",
			`  stalesweep pm sweep --queue default --ttl 300 --dry-run`,
			func(args []string) int { return cmdPM(c.ctx, args, c.stdout, c.stderr) }),
		c.legacy("demo [--pipeline]", "seed the emulator, sweep until nothing stale remains, summarize",
			`  stalesweep demo`,
			func(args []string) int { return cmdDemo(c.ctx, args, c.stdout, c.stderr) }),
		c.legacy("serve [--addr HOST:PORT]", "serve the function targets locally (functions framework)",
			`  STALESWEEP_AUTH=off stalesweep serve --addr 127.0.0.1:8080`,
			func(args []string) int { return cmdServe(c.ctx, args, c.stderr) }),
		c.legacy("bench [--rows N] [--concurrency C] [--quick] [--out DIR]", "measure throughput and cost against the emulators",
			`  stalesweep bench --quick --out /tmp/bench`,
			func(args []string) int { return cmdBench(c.ctx, args, c.stdout, c.stderr) }),
		c.legacy("fake-cloudrun --addr HOST:PORT --executions FILE", "serve the Cloud Run Executions fake",
			`  stalesweep fake-cloudrun --addr 127.0.0.1:9090 --executions executions.json`,
			func(args []string) int { return cmdFakeCloudRun(c.ctx, args, c.stdout, c.stderr) }),
		c.legacy("executors list | clear TARGET", "what the blind-executor guard judged; clear a target after checking",
			`  stalesweep executors list`,
			func(args []string) int { return cmdExecutors(c.ctx, args, c.stdout, c.stderr) }),
		c.legacy("indexes [--check] [--gcloud --project P]", "write or check the index files, or print gcloud commands",
			`  stalesweep indexes --check`,
			func(args []string) int { return cmdIndexes(args, c.stdout, c.stderr) }),
		c.versionCmd(),
		c.explainCmd(),
		c.pauseCmd(), c.resumeCmd(), c.pausesCmd(), c.runsCmd(),
	)
	return root
}

// legacy wraps a command that parses its own flags with the standard library's flag package.
func (c *cli) legacy(use, short, example string, body func(args []string) int) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short,
		Example:            example,
		DisableFlagParsing: true,
		RunE:               func(cmd *cobra.Command, args []string) error { return exit(body(args)) },
	}
}
