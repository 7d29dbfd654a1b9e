package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "{}", "initial_data as JSON; @FILE reads a file, @- reads stdin")
	project := fs.String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT; "+app.EmulatorProjectLocal+" against the emulator)")
	override := fs.Bool("override-storm-guard", false, "let a run the storm guard stops settle anyway: only after checking that the workers really are gone")
	includeDisabled := fs.Bool("include-disabled", false, "sweep the organization even if it opted out of sweeps (organizations/ORG sweeps_enabled not true)")
	overridePause := fs.Bool("override-pause", false, "run even though the workflow is paused on this scope (stalesweep pause)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: stalesweep run WORKFLOW_TYPE --data JSON [--project P] [--override-storm-guard] [--include-disabled] [--override-pause]\n\nworkflow types:\n")
		for _, t := range contract.Seeded() {
			fmt.Fprintf(stderr, "  %s\n", t)
		}
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	typ, err := parseInterspersed(fs, args)
	if err != nil {
		return exitInvalid
	}
	if typ == "" {
		fs.Usage()
		return exitInvalid
	}
	raw, err := readData(*data, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep run: --data: %v\n", err)
		return exitInvalid
	}
	if _, err := contract.Validate(contract.WorkflowType(typ), raw); err != nil {
		fmt.Fprintf(stderr, "stalesweep run: %v\n", err)
		return exitInvalid
	}

	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep run: %v\n", err)
		return exitInvalid
	}
	if *project != "" {
		cfg.Project = *project
	}
	log := logging.New(stderr, logging.ParseLevel(cfg.LogLevel))
	a, err := app.New(ctx, cfg, log, time.Now, app.Parts{})
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep run: %v\n", err)
		return exitFailed
	}
	defer a.Close()

	if *override {
		fmt.Fprintln(stderr, "stalesweep run: the storm guard is overridden for this run (--override-storm-guard)")
	}
	if *includeDisabled {
		fmt.Fprintln(stderr, "stalesweep run: an organization that opted out of sweeps is swept anyway (--include-disabled)")
	}
	out, err := a.Engine.Start(ctx, workflow.Request{
		Type:            contract.WorkflowType(typ),
		InitialData:     raw,
		Trigger:         workflow.TriggerLocal,
		Actor:           localActor(),
		ClaimedActor:    os.Getenv(envActor),
		StormOverride:   *override,
		IncludeDisabled: *includeDisabled,
		OverridePause:   *overridePause,
	})
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep run: %v\n", err)
		switch {
		case workflow.IsValidation(err):
			return exitInvalid
		case errors.Is(err, ledger.ErrOrganizationDisabled):
			fmt.Fprintln(stderr, "stalesweep run: to sweep it anyway, add --include-disabled")
			return exitInvalid
		case errors.Is(err, ledger.ErrPaused):
			fmt.Fprintln(stderr, "stalesweep run: to run it anyway, add --override-pause; to lift the pause, stalesweep resume")
			return exitPaused
		}
		return exitFailed
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a reclaimer or a task named <&> prints as it is
	if err := enc.Encode(out.Output); err != nil {
		return exitFailed
	}
	if out.Status != workflow.StateCompleted {
		fmt.Fprintf(stderr, "stalesweep run: run %s failed: %v\n", out.RunUUID, out.Err)
		return exitFailed
	}
	return exitOK
}

// parseInterspersed parses flags that may come before or after the one positional argument.
func parseInterspersed(fs *flag.FlagSet, args []string) (string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(positional) {
	case 0:
		return "", nil
	case 1:
		return positional[0], nil
	default:
		fmt.Fprintf(fs.Output(), "stalesweep %s: want one WORKFLOW_TYPE, got %q\n", fs.Name(), positional)
		return "", fmt.Errorf("too many arguments")
	}
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
