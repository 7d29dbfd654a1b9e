package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/logging"
)

// StatusBudget bounds the whole fleet view: each workflow's dispatch has its own budget
// (STALESWEEP_DISPATCH_BUDGET) within it.
const StatusBudget = 5 * time.Minute

func (c *cli) statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--limit N] [--data WORKFLOW_TYPE=JSON]... [-o table|json]",
		Short: "what the next tick would do, fleet-wide: the scopes with work, paused, opted out, blind targets",
		Long: fmt.Sprintf(`status runs the dispatcher of every workflow as a tick would — the roster of organizations,
their runner groups, the queues, the pauses, and each workflow's probe — on a Firestore
connection that refuses every write, and publishes nothing. It costs what a tick costs, not a
scan per organization. For each workflow it prints the dispatcher's counts, the scopes with work
(at most --limit, default %d, at most %d; then how many more), each execution sync's oldest
stale row per scope shown, the pauses that hold, and the newest run; then the organizations
opted out (sweeps_enabled: false) and the executor targets judged blind.
Each tick's initial_data is the Terraform module's default; --data gives a workflow's own, as
its scheduler job sends it.`, fleet.StatusLimitDefault, fleet.StatusLimitMax),
		Example: `  stalesweep status
  stalesweep status --limit 200 -o json
  stalesweep status --data 'runner.execution-sync-stale-cloud-run={"min_age_seconds": 300}'`,
		Args: cobra.NoArgs,
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	limit := cmd.Flags().Int("limit", fleet.StatusLimitDefault, fmt.Sprintf("scopes shown per list, 1 to %d", fleet.StatusLimitMax))
	data := cmd.Flags().StringArray("data", nil, "WORKFLOW_TYPE=JSON: the initial_data of that workflow's tick (repeatable, one per workflow)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		if *limit < 1 || *limit > fleet.StatusLimitMax {
			return c.usageError(cmd, "--limit: between 1 and %d, got %d", fleet.StatusLimitMax, *limit)
		}
		ticks := map[contract.WorkflowType]json.RawMessage{}
		for _, d := range *data {
			name, raw, ok := strings.Cut(d, "=")
			if !ok {
				return c.usageError(cmd, "--data: want WORKFLOW_TYPE=JSON, got %q", d)
			}
			t, err := checkWorkflowType("--data", name)
			if err != nil {
				return c.usageError(cmd, "%v", err)
			}
			if _, dup := ticks[t]; dup {
				return c.usageError(cmd, "--data: %s given twice", t)
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(raw), &obj); err != nil {
				return c.usageError(cmd, "--data %s: not a JSON object: %v", t, err)
			}
			ticks[t] = json.RawMessage(raw)
		}
		cfg, ok := c.config("status", *project)
		if !ok {
			return exitCode(exitInvalid)
		}
		ctx, cancel := context.WithTimeout(c.ctx, StatusBudget)
		defer cancel()
		a, code := c.newApp("status", cfg, logging.New(c.stderr, logging.ParseLevel(cfg.LogLevel)), fleet.ReadOnly()...)
		if a == nil {
			return exitCode(code)
		}
		defer a.Close()
		f := fleet.Fleet{Firestore: a.Firestore, Workflows: a.Engine, Declared: app.Declared(), Dispatch: cfg.Dispatch,
			RosterMaxAge: cfg.RosterMaxAge, Retention: cfg.Retention, Kinds: []executionsync.Kind{executionsync.CloudRun, executionsync.Kubernetes}}
		st, err := f.Status(ctx, fleet.StatusConfig{Limit: *limit, Data: ticks})
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep status: %v\n", err)
			return exitCode(exitFailed)
		}
		if *format == formatJSON {
			return printJSON(c.stdout, st)
		}
		return writeStatus(c.stdout, st)
	}
	return cmd
}

// writeStatus prints the fleet view for a person: one block per workflow, then the fleet's.
func writeStatus(w io.Writer, st fleet.Status) error {
	fmt.Fprintf(w, "next tick, as of %s (Firestore's clock)\n", stamp(st.At))
	for _, ws := range st.Workflows {
		r := ws.Dispatch
		fmt.Fprintf(w, "\n%s: %d scopes, %d with work, %d quiet, %d paused, %d probe errors", ws.WorkflowType, r.Scopes, r.Published, r.Quiet, r.Paused, r.ProbeErrors)
		if r.PausedFleet {
			fmt.Fprint(w, "; paused fleet-wide")
		}
		if r.Capped {
			fmt.Fprint(w, "; a list stopped at its limit")
		}
		if r.Roster != "" {
			fmt.Fprintf(w, "; organizations from: %s", r.Roster)
		}
		fmt.Fprintln(w)
		if ws.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", ws.Error)
		}
		if ws.LastRun != nil {
			l := ws.LastRun
			fmt.Fprintf(w, "  last run: %s %s at %s\n", l.WorkflowRunUUID, l.Status+failedWith(l.FailureReason), stamp(l.InitiatedAt))
		} else {
			fmt.Fprintln(w, "  last run: none")
		}
		for _, p := range ws.Paused {
			fmt.Fprintf(w, "  paused: %s\n", p)
		}
		if len(ws.Work) > 0 {
			rows := make([][]string, 0, len(ws.Work))
			for _, s := range ws.Work {
				row := []string{"  " + s.Scope, "-", "-", "-"}
				if o := s.OldestStale; o != nil {
					row = []string{"  " + s.Scope, o.RunnerExecutionUUID, stamp(o.ObservedAt), strconv.FormatInt(o.AgeSeconds, 10) + "s"}
				}
				rows = append(rows, row)
			}
			if err := printTable(w, []string{"  SCOPE WITH WORK", "OLDEST STALE ROW", "OBSERVED_AT", "AGE"}, rows); err != nil {
				return err
			}
		}
		if ws.WorkMore > 0 {
			fmt.Fprintf(w, "  and %d more scopes with work (raise --limit)\n", ws.WorkMore)
		}
	}
	fmt.Fprintf(w, "\nopted out (sweeps_enabled: false): %s\n", dash(strings.Join(st.OptedOut, ", ")))
	if st.OptedOutMore {
		fmt.Fprintln(w, "  and more (stalesweep orgs list shows every organization)")
	}
	if len(st.BlindTargets) == 0 {
		fmt.Fprintln(w, "blind targets: none")
	}
	for _, t := range st.BlindTargets {
		fmt.Fprintf(w, "blind target: %s since %s (%d of %d asked unknown)\n", t.Target, stamp(t.BlindSince), t.Unknown, t.Asked)
	}
	return nil
}

// failedWith is " (REASON)" for a run that failed with one.
func failedWith(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
