package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// PauseForMax bounds --for: a pause meant to last longer is an indefinite one, resumed by hand.
const PauseForMax = 30 * 24 * time.Hour

func (c *cli) pauseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pause WORKFLOW_TYPE [--scope KEY] --reason TEXT [--for DURATION]",
		Short: "stop a workflow, fleet-wide or on one scope, until resumed",
		Long: `pause stops every scheduled, Pub/Sub and HTTP run of a workflow on one scope — an organization
uuid, "org/group" for a runner group (an organization's pause covers its groups), a queue — or,
without --scope, on every scope. Ticks publish no sweep for it, a run refuses to start, and a
run already running writes no further row: each settling transaction reads the pause. "stalesweep run --override-pause" and an HTTP
start with "override_pause": true still run it. Pausing again replaces the reason and the end.`,
		Example: `  stalesweep pause runner.execution-sync-stale-cloud-run --scope 0f8fad5b-d9cb-469f-a165-70867728950e --reason "INC-42: Cloud Run API incident"
  stalesweep pause pm.sweep --reason "queue migration" --for 2h`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeWorkflowTypes,
	}
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	scope := cmd.Flags().String("scope", "", "the scope to pause (its key: an organization uuid, org/group, a queue); none pauses every scope")
	reason := cmd.Flags().String("reason", "", "why, shown to whoever the pause refuses (required)")
	dur := cmd.Flags().Duration("for", 0, "end the pause by itself after this long (e.g. 2h); none holds until resumed")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		typ, err := checkScope(args[0], *scope)
		if err != nil {
			return c.usageError(cmd, "%v", err)
		}
		switch {
		case strings.TrimSpace(*reason) == "":
			return c.usageError(cmd, "--reason: required: say why, for whoever the pause stops")
		case len(*reason) > pausestore.ReasonMax:
			return c.usageError(cmd, "--reason: at most %d bytes", pausestore.ReasonMax)
		case *dur < 0 || *dur > PauseForMax:
			return c.usageError(cmd, "--for: between 1s and %s, got %s", PauseForMax, *dur)
		}
		fsc, _, code := c.openFirestore("pause", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		// A scope nothing knows is most likely a typo, but a pause may be taken ahead of the
		// scope's first row: warned, not refused.
		c.warnUnknownScope("pause", fsc, typ, *scope, 0, "pausing it anyway; stalesweep resume lifts it")
		now := time.Now().UTC()
		p := pausestore.Pause{WorkflowType: string(typ), Scope: *scope, PausedBy: localActor(), PausedAt: now, Reason: *reason}
		if *dur > 0 {
			p.Until = now.Add(*dur)
		}
		if err := pausestore.New(fsc).Put(c.ctx, p); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep pause: %v\n", err)
			return exitCode(exitFailed)
		}
		fmt.Fprintf(c.stdout, "paused: %s\n", p)
		return nil
	}
	return cmd
}

func (c *cli) resumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume WORKFLOW_TYPE [--scope KEY]",
		Short: "lift a pause taken with stalesweep pause",
		Long: `resume deletes the pause of a workflow on one scope (--scope) or fleet-wide (no --scope): the
next tick sweeps the scope again. Resuming what is not paused does nothing and succeeds. A
fleet-wide pause and a scope's are separate: resume the one "stalesweep pauses list" shows.
Without --scope, resume also lists the scopes' pauses that still hold, with the command that
resumes each.`,
		Example: `  stalesweep resume runner.execution-sync-stale-cloud-run --scope 0f8fad5b-d9cb-469f-a165-70867728950e
  stalesweep resume pm.sweep`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeWorkflowTypes,
	}
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	scope := cmd.Flags().String("scope", "", "the scope to resume; none resumes the fleet-wide pause")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		typ, err := checkScope(args[0], *scope)
		if err != nil {
			return c.usageError(cmd, "%v", err)
		}
		fsc, _, code := c.openFirestore("resume", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		existed, err := pausestore.New(fsc).Delete(c.ctx, string(typ), *scope)
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep resume: %v\n", err)
			return exitCode(exitFailed)
		}
		on := (pausestore.Pause{Scope: *scope}).ScopeName()
		if existed {
			fmt.Fprintf(c.stdout, "resumed: %s on %s\n", typ, on)
		} else {
			fmt.Fprintf(c.stdout, "not paused: %s on %s (nothing to do)\n", typ, on)
		}
		if *scope == "" {
			// A fleet-wide resume leaves the scopes' own pauses: say which still hold.
			return exit(c.listScopedPauses(fsc, typ))
		}
		return nil
	}
	return cmd
}

// listScopedPauses says, after a fleet-wide resume of typ, the pauses of its scopes that still
// hold and how to resume each.
func (c *cli) listScopedPauses(fsc *firestore.Client, typ contract.WorkflowType) int {
	pauses, err := pausestore.New(fsc).List(c.ctx, string(typ), pausestore.PauseListMax)
	if err != nil {
		fmt.Fprintf(c.stderr, "stalesweep resume: %v\n", err)
		return exitFailed
	}
	now := time.Now()
	var held []pausestore.Pause
	for _, p := range pauses {
		if !p.Fleet() && p.Active(now) {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return exitOK
	}
	fmt.Fprintf(c.stdout, "still paused on %d scope(s), which a fleet-wide resume leaves; resume each with --scope:\n", len(held))
	for _, p := range held {
		fmt.Fprintf(c.stdout, "  %s\n    stalesweep resume %s --scope %s\n", p, typ, p.Scope)
	}
	return exitOK
}

func (c *cli) pausesCmd() *cobra.Command {
	list := &cobra.Command{
		Use:   "list [--workflow T] [-o table|json]",
		Short: "list the pauses, ended ones marked",
		Example: `  stalesweep pauses list
  stalesweep pauses list --workflow pm.sweep -o json`,
		Args: cobra.NoArgs,
	}
	format := outputFlag(list)
	project := list.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	typ := list.Flags().String("workflow", "", "only this workflow type's pauses")
	_ = list.RegisterFlagCompletionFunc("workflow", completeWorkflowTypes)
	list.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		if *typ != "" {
			if _, err := checkWorkflowType("--workflow", *typ); err != nil {
				return c.usageError(cmd, "%v", err)
			}
		}
		fsc, _, code := c.openFirestore("pauses list", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		pauses, err := pausestore.New(fsc).List(c.ctx, *typ, pausestore.PauseListMax)
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep pauses list: %v\n", err)
			return exitCode(exitFailed)
		}
		now := time.Now()
		if *format == formatJSON {
			type view struct {
				pausestore.Pause
				Active bool `json:"active"`
			}
			out := make([]view, 0, len(pauses))
			for _, p := range pauses {
				out = append(out, view{p, p.Active(now)})
			}
			return printJSON(c.stdout, map[string]any{"pauses": out})
		}
		rows := make([][]string, 0, len(pauses))
		for _, p := range pauses {
			until, state := "-", "active"
			if !p.Until.IsZero() {
				until = p.Until.UTC().Format(time.RFC3339)
			}
			if !p.Active(now) {
				state = "ended"
			}
			rows = append(rows, []string{p.WorkflowType, p.ScopeName(), state, p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339), until, p.Reason})
		}
		return printTable(c.stdout, []string{"WORKFLOW_TYPE", "SCOPE", "STATE", "PAUSED_BY", "PAUSED_AT", "UNTIL", "REASON"}, rows)
	}
	return c.group("pauses", "list the workflows paused with stalesweep pause", `  stalesweep pauses list
  stalesweep pauses list --workflow pm.sweep -o json`, list)
}

// checkWorkflowType refuses a type this build does not run, naming the argument.
func checkWorkflowType(arg, typ string) (contract.WorkflowType, error) {
	t := contract.WorkflowType(typ)
	if _, ok := app.Declared()[t]; !ok {
		names := make([]string, 0)
		for _, s := range contract.Seeded() {
			names = append(names, string(s))
		}
		return "", fmt.Errorf("%s: want one of %s, got %q", arg, strings.Join(names, ", "), typ)
	}
	return t, nil
}

// checkScope refuses a workflow type this build does not run, and a scope key its workflow's
// scope fields would not accept: a fleet-wide workflow takes none; the others take one value
// per scope field, in order and joined by "/", or a prefix of them (an organization of a
// runner-group workflow), each valid as its field's schema says.
func checkScope(typ, scope string) (contract.WorkflowType, error) {
	t, err := checkWorkflowType("WORKFLOW_TYPE", typ)
	if err != nil || scope == "" {
		return t, err
	}
	s := app.Declared()[t].Scope
	if len(s.Fields) == 0 {
		return "", fmt.Errorf("--scope: %s runs fleet-wide and has no scope; pause it without --scope", t)
	}
	parts := strings.Split(scope, "/")
	if len(parts) > len(s.Fields) {
		return "", fmt.Errorf("--scope: want %s (or a prefix), got %q", strings.Join(s.Names(), "/"), scope)
	}
	input := map[string]any{}
	for i, f := range s.Fields {
		input[f.Name] = f.Example
		if i < len(parts) {
			input[f.Name] = parts[i]
		}
	}
	raw, _ := json.Marshal(input)
	if _, err := contract.Validate(t, raw); err != nil {
		return "", fmt.Errorf("--scope: %q is not a scope of %s (%s): %v", scope, t, strings.Join(s.Names(), "/"), err)
	}
	return t, nil
}

// checkPaused adds to e the check every scan makes first: whether the row's workflow is paused
// on its scope, or fleet-wide, now.
func checkPaused(ctx context.Context, a *app.App, e *explain.Explanation) error {
	if e.WorkflowType == "" {
		return nil
	}
	p, err := pausestore.New(a.Firestore).Covering(ctx, e.WorkflowType, e.Scope, time.Now())
	if err != nil {
		return err
	}
	check := explain.Check{Name: "not paused", OK: p == nil, Detail: "no pause covers " + e.WorkflowType + " on this scope"}
	if p != nil {
		where, resume := "on "+p.Scope, "stalesweep resume "+p.WorkflowType+" --scope "+p.Scope
		if p.Fleet() {
			where, resume = "fleet-wide", "stalesweep resume "+p.WorkflowType
		}
		check.Detail = fmt.Sprintf("paused %s (every scope of %s) by %s at %s", where, p.WorkflowType, p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339))
		if !p.Fleet() {
			check.Detail = fmt.Sprintf("paused %s by %s at %s", where, p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339))
		}
		if p.Reason != "" {
			check.Detail += ": " + p.Reason
		}
		if !p.Until.IsZero() {
			check.Detail += " (until " + p.Until.UTC().Format(time.RFC3339) + ")"
		}
		check.Detail += "; " + resume + " lifts it"
		// No run of the scope starts while it is paused: the next one leaves the row alone,
		// whatever the workflow would decide once resumed (said in the detail).
		e.Detail = "paused " + where + "; once resumed: " + e.Verdict + " (" + e.Rule + ")"
		e.Verdict, e.Outcome, e.Rule = "skip", "", "paused"
	}
	e.Checks = append(e.Checks, check)
	e.Decided()
	return nil
}

// completeWorkflowTypes completes a workflow type argument.
func completeWorkflowTypes(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	types := app.Declared().Types()
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = string(t)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// scopeOf is the scope a run record covers: its scope field, or, for a record written before the
// field existed, its workflow's scope read from its initial data.
func scopeOf(rec runstore.RunRecord) string {
	if rec.Scope != "" {
		return rec.Scope
	}
	d, ok := app.Declared()[contract.WorkflowType(rec.WorkflowType)]
	if !ok {
		return ""
	}
	raw, _ := json.Marshal(rec.InitialData)
	return d.Scope.Key(raw)
}
