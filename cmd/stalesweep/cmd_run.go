package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Formats of what a run prints (-o).
const (
	// formatOutput prints the seed's output, exactly as the seed defines it.
	formatOutput = "output"
	// formatRun prints the run: its uuid, type, status, whether it was a dry run, the seed's
	// output, its stats (a dry run's preview among them) and why it failed.
	formatRun = "run"
)

// runResult is what -o run prints: the run as a script needs it.
type runResult struct {
	WorkflowRunUUID string         `json:"workflow_run_uuid"`
	WorkflowType    string         `json:"workflow_type"`
	Status          string         `json:"status"`
	DryRun          bool           `json:"dry_run"`
	Output          map[string]any `json:"output"`
	Stats           map[string]any `json:"stats,omitempty"`
	Error           string         `json:"error,omitempty"`
}

// runFlags are the flags every command that starts a run shares.
type runFlags struct {
	project         string
	format          string
	override        bool
	includeDisabled bool
	dryRun          bool
	overridePause   bool
}

func (f *runFlags) add(cmd *cobra.Command, dryRunHelp string) {
	cmd.Flags().StringVar(&f.project, "project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT; "+app.EmulatorProjectLocal+" against the emulator)")
	cmd.Flags().StringVarP(&f.format, "output", "o", formatOutput, "what to print: output (the seed's output JSON) or run (uuid, status, output, stats)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{formatOutput, formatRun}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().BoolVar(&f.override, "override-storm-guard", false, "let a run the storm guard stops settle anyway: only after checking that the workers really are gone")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, dryRunHelp)
	cmd.Flags().BoolVar(&f.overridePause, "override-pause", false, "run even though the workflow is paused on this scope (stalesweep pause)")
}

func (c *cli) runCmd() *cobra.Command {
	var f runFlags
	var data string
	cmd := &cobra.Command{
		Use:   "run WORKFLOW_TYPE --data JSON",
		Short: "run one workflow inline; prints its output JSON",
		Long: `run starts one run of a workflow in this process, against the configured Firestore and
executor, and prints the seed's output JSON. -o run prints the run instead: its
workflow_run_uuid, status, output and stats. --dry-run does everything but write: the same scan,
executor calls, decisions and guards, and prints the run with its preview; nothing is written,
not even a run record.

Exit codes: 0 completed; 1 failed (or an error); 2 invalid input, a bad setting, or an
organization that opted out of sweeps (without --include-disabled); 3 another run of the workflow
holds the scope (a conflict); 5 the workflow is paused on the scope (without --override-pause).

Workflow types:
  ` + strings.Join(seededTypes(), "\n  "),
		Example: `  stalesweep run runner.execution-sync-stale-cloud-run --data '{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "limit": 50}'
  stalesweep run runner.execution-sync-stale-cloud-run --data @input.json -o run | jq -r .workflow_run_uuid
  stalesweep run platform.extension.runs.sweep --data '{"older_than_ms": 600000}' --dry-run`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return seededTypes(), cobra.ShellCompDirectiveNoFileComp
		},
	}
	cmd.Flags().StringVar(&data, "data", "{}", "initial_data as JSON; @FILE reads a file, @- reads stdin")
	cmd.Flags().BoolVar(&f.includeDisabled, "include-disabled", false, "sweep the organization even if it opted out of sweeps (organizations/ORG sweeps_enabled not true)")
	f.add(cmd, "preview: the same scan, executor calls, decisions and guards as a run, and not one write; prints the run with its preview")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return c.usageError(cmd, "want one WORKFLOW_TYPE, got %q", args)
		}
		if f.format != formatOutput && f.format != formatRun {
			return c.usageError(cmd, "--output: want output or run, got %q", f.format)
		}
		if f.dryRun && !cmd.Flags().Changed("output") {
			f.format = formatRun // a preview is its stats: print the run
		}
		raw, err := readData(data, c.stdin)
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep run: --data: %v\n", err)
			return exitCode(exitInvalid)
		}
		if _, err := contract.Validate(contract.WorkflowType(args[0]), raw); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep run: %v\n", err)
			return exitCode(exitInvalid)
		}
		return exit(c.startRun("run", f, workflow.Request{Type: contract.WorkflowType(args[0]), InitialData: raw}))
	}
	return cmd
}

// startRun starts req as a local run with f's flags and prints it: what every command that runs
// a workflow shares.
func (c *cli) startRun(name string, f runFlags, req workflow.Request) int {
	a, code := c.openApp(name, f.project)
	if a == nil {
		return code
	}
	defer a.Close()
	if f.override {
		fmt.Fprintf(c.stderr, "stalesweep %s: the storm guard is overridden for this run (--override-storm-guard)\n", name)
	}
	if f.includeDisabled {
		fmt.Fprintf(c.stderr, "stalesweep %s: an organization that opted out of sweeps is swept anyway (--include-disabled)\n", name)
	}
	req.Trigger = workflow.TriggerLocal
	req.Actor, req.ClaimedActor = localActor(), os.Getenv(envActor)
	req.Overrides, req.DryRun = workflow.Overrides{Storm: f.override, OptOut: f.includeDisabled, Pause: f.overridePause}, f.dryRun
	out, err := a.Engine.Start(c.ctx, req)
	if err != nil {
		fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
		return startErrorCode(err, c.stderr, name)
	}
	res := runResult{WorkflowRunUUID: out.RunUUID, WorkflowType: string(req.Type), Status: out.Status, DryRun: out.DryRun, Output: out.Output, Stats: out.Stats}
	if out.Err != nil {
		res.Error = out.Err.Error()
	}
	var v any = out.Output
	if f.format == formatRun {
		v = res
	}
	if err := printJSON(c.stdout, v); err != nil {
		return exitFailed
	}
	what := "run"
	if out.DryRun {
		what = "dry run (nothing written)"
	}
	if out.Status != workflow.StateCompleted {
		fmt.Fprintf(c.stderr, "stalesweep %s: %s %s failed: %v\n", name, what, out.RunUUID, out.Err)
		return exitFailed
	}
	fmt.Fprintf(c.stderr, "stalesweep %s: %s %s completed\n", name, what, out.RunUUID)
	return exitOK
}

// startErrorCode is the exit code of a run the engine refused to start.
func startErrorCode(err error, stderr io.Writer, name string) int {
	switch {
	case workflow.IsValidation(err):
		return exitInvalid
	case errors.Is(err, workflow.ErrOrganizationDisabled):
		fmt.Fprintf(stderr, "stalesweep %s: to sweep it anyway, add --include-disabled\n", name)
		return exitInvalid
	case errors.Is(err, runstore.ErrPaused):
		fmt.Fprintf(stderr, "stalesweep %s: to run it anyway, add --override-pause; to lift the pause, stalesweep resume\n", name)
		return exitPaused
	case contract.CodeOf(err) == contract.CodeConflict:
		return exitConflict
	}
	return exitFailed
}

func seededTypes() []string {
	var out []string
	for _, t := range contract.Seeded() {
		out = append(out, string(t))
	}
	return out
}

func readData(v string, stdin io.Reader) ([]byte, error) {
	path, isFile := strings.CutPrefix(v, "@")
	if !isFile {
		return []byte(v), nil
	}
	if path == "-" {
		return io.ReadAll(io.LimitReader(stdin, 1<<20))
	}
	return os.ReadFile(path)
}

// envActor is who the operator says they are, recorded as the run's claimed_actor.
const envActor = "STALESWEEP_ACTOR"

// localActor names the local principal running the command, for the run record: the operating
// system's user of this process (not an environment variable anyone can set) on this host.
func localActor() string {
	name := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "local:" + name + "@" + cmp.Or(host, "localhost")
}

// checkRunUUID refuses what cannot be a run's workflow_run_uuid (every run is named by a uuid in
// its canonical form), so that a typo is a usage error (exit 2) and only a well-formed uuid that
// names no run is "not found" (exit 4).
func checkRunUUID(s string) error {
	if u, err := uuid.Parse(s); err != nil || u.String() != strings.ToLower(s) {
		return fmt.Errorf("is not a uuid (8-4-4-4-12 hexadecimal digits)")
	}
	return nil
}
