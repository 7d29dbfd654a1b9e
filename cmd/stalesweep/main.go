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
	"strings"
	"sync/atomic"
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
	// exitPaused: the workflow is paused on the run's scope (errors.Is(err, runstore.ErrPaused)).
	exitPaused = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli is one invocation of the command: its streams, and the exit code a command chose.
type cli struct {
	ctx context.Context
	// cancels end the budgets the command was given (bound), once it has returned.
	cancels []context.CancelFunc
	// stall is the first Firestore call that waited out its whole bound (stallNoted); reached
	// says the opener's first read was answered (an unreachable Firestore is said there).
	stall   atomic.Pointer[stalled]
	reached bool
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// exitCode is a command's chosen exit code, returned as an error so that cobra stops there; it
// has already said why on stderr.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exit turns a command's exit code into RunE's error.
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
	cmd, err := root.ExecuteContextC(ctx)
	defer func() {
		for _, cancel := range c.cancels {
			cancel()
		}
	}()
	var code exitCode
	stall := c.stall.Load()
	if spent := (*stalled)(nil); errors.As(context.Cause(c.ctx), &spent) {
		stall = spent
	}
	if err != nil && stall != nil && c.reached {
		// Whatever the command made of its calls' errors, this is why they failed.
		fmt.Fprintf(stderr, "stalesweep: %v\n", stall)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	default: // cobra's own: an unknown command or flag, a wrong number of arguments
		fmt.Fprintf(stderr, "stalesweep: %v\n", err)
		fmt.Fprintf(stderr, "Run \"%s --help\" for usage.\n", cmd.CommandPath())
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
		c.runCmd(),
		c.pmCmd(),
		c.demoCmd(),
		c.serveCmd(),
		c.benchCmd(),
		c.fakeCloudRunCmd(),
		c.executorsCmd(),
		c.indexesCmd(),
		c.versionCmd(),
		c.explainCmd(),
		c.alertsCmd(),
		c.sinksCmd(),
		c.settingsCmd(),
		c.gcCmd(),
		c.pauseCmd(),
		c.resumeCmd(),
		c.pausesCmd(),
		c.runsCmd(),
		c.orgsCmd(), c.statusCmd(),
	)
	refuseRepeatedFlags(root) // a second value of a single-valued flag is a usage error (flags_once.go)
	// The streams are set before cobra's completion command is made: it keeps the one it sees.
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	// cobra's own help and completion commands, given examples like every other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "help":
			cmd.Example = "  stalesweep help run"
		case "completion":
			cmd.Example = "  source <(stalesweep completion bash)\n  stalesweep completion zsh > \"${fpath[1]}/_stalesweep\""
			examples := map[string]string{
				"bash":       "  source <(stalesweep completion bash)",
				"zsh":        "  stalesweep completion zsh > \"${fpath[1]}/_stalesweep\"",
				"fish":       "  stalesweep completion fish | source",
				"powershell": "  stalesweep completion powershell | Out-String | Invoke-Expression",
			}
			for _, sh := range cmd.Commands() {
				sh.Example = examples[sh.Name()]
			}
		}
	}
	return root
}

// group is a command that only holds subcommands: without one it says which it wants; with an
// unknown one it suggests the nearest, as cobra does for the root's.
func (c *cli) group(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Example: example, Args: cobra.ArbitraryArgs}
	cmd.AddCommand(subs...)
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, sub := range cmd.Commands() {
			names = append(names, sub.Name())
		}
		if len(args) == 0 {
			return c.usageError(cmd, "want a subcommand: %s", strings.Join(names, ", "))
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return c.usageError(cmd, "%s", msg)
	}
	return cmd
}
