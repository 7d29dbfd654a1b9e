package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// runStatuses are the states a run record can be in, across every workflow's machine.
var runStatuses = []string{"initiated", workflow.StateReconciling, "pending", workflow.StateCompleted, workflow.StateFailed}

func (c *cli) runsCmd() *cobra.Command {
	return c.group("runs", "look back on workflow runs: list them, show one, end one presumed dead", `  stalesweep runs list --workflow pm.sweep --since 24h
  stalesweep runs show 3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64
  stalesweep runs abandon 3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64 --reason "INC-7: its instance was killed"`, c.runsListCmd(), c.runsShowCmd(), c.runsAbandonCmd())
}

func (c *cli) runsListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--workflow T] [--scope S] [--status S] [--since DURATION|TIME] [--limit N] [--page-token T]",
		Short: "list runs, newest first, a page at a time",
		Long: `list prints the run records (sweep_runs) newest first, at most --limit of them (default 20, at
most 500). When there are more, it ends with the page token that lists the next page: pass it
back with --page-token and the same filters. --scope needs --workflow.`,
		Example: `  stalesweep runs list
  stalesweep runs list --workflow runner.execution-sync-stale-cloud-run --scope 0f8fad5b-d9cb-469f-a165-70867728950e --status failed
  stalesweep runs list --since 2026-12-01T00:00:00Z --limit 100 -o json`,
		Args: cobra.NoArgs,
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	typ := cmd.Flags().String("workflow", "", "only this workflow type's runs")
	scope := cmd.Flags().String("scope", "", "only runs on this scope (its key: an organization uuid, org/group, a queue; \"fleet\"); needs --workflow")
	st := cmd.Flags().String("status", "", "only runs in this status: "+strings.Join(runStatuses, ", "))
	since := cmd.Flags().String("since", "", "only runs initiated since: a duration back from now (24h) or a time (RFC 3339)")
	limit := cmd.Flags().Int("limit", fleet.RunListLimitDefault, fmt.Sprintf("runs per page, 1 to %d", fleet.RunListLimitMax))
	token := cmd.Flags().String("page-token", "", "the token the previous page ended with")
	_ = cmd.RegisterFlagCompletionFunc("workflow", completeWorkflowTypes)
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(runStatuses, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		q := fleet.RunQuery{Scope: *scope, Status: *st, Limit: *limit, PageToken: *token}
		if *typ != "" {
			t, err := checkWorkflowType("--workflow", *typ)
			if err != nil {
				return c.usageError(cmd, "%v", err)
			}
			q.WorkflowType = string(t)
		}
		switch {
		case *scope != "" && *typ == "":
			return c.usageError(cmd, "--scope: needs --workflow, since a scope key's form is its workflow's")
		case *st != "" && !slices.Contains(runStatuses, *st):
			return c.usageError(cmd, "--status: want one of %s, got %q", strings.Join(runStatuses, ", "), *st)
		case *limit < 1 || *limit > fleet.RunListLimitMax:
			return c.usageError(cmd, "--limit: between 1 and %d, got %d", fleet.RunListLimitMax, *limit)
		}
		if *since != "" {
			at, err := parseSince(*since, time.Now())
			if err != nil {
				return c.usageError(cmd, "--since: %v", err)
			}
			q.Since = at
		}
		if err := q.Check(); err != nil {
			return c.usageError(cmd, "--%s", strings.Replace(err.Error(), "_", "-", 1))
		}
		fsc, _, code := c.openFirestore("runs list", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		page, err := fleet.NewRunHistory(fsc).ListRuns(c.ctx, q)
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep runs list: %v\n", err)
			return exitCode(exitFailed)
		}
		if *format == formatJSON {
			views := make([]runView, 0, len(page.Runs))
			for _, r := range page.Runs {
				views = append(views, viewOf(r))
			}
			return printJSON(c.stdout, map[string]any{"runs": views, "next_page_token": page.Next})
		}
		rows := make([][]string, 0, len(page.Runs))
		for _, r := range page.Runs {
			reason := "-"
			if r.Failure != nil {
				reason = r.Failure.Reason
			}
			rows = append(rows, []string{r.WorkflowRunUUID, r.WorkflowType, scopeOf(r), r.Status, r.Trigger, stamp(r.InitiatedAt), took(r), settledOf(r), reason})
		}
		if err := printTable(c.stdout, []string{"WORKFLOW_RUN_UUID", "WORKFLOW_TYPE", "SCOPE", "STATUS", "TRIGGER", "INITIATED_AT", "TOOK", "SETTLED", "FAILURE_REASON"}, rows); err != nil {
			return err
		}
		if page.Next != "" {
			fmt.Fprintf(c.stdout, "\nmore runs: add --page-token %s\n", page.Next)
		}
		return nil
	}
	return cmd
}

func (c *cli) runsShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show WORKFLOW_RUN_UUID [-o table|json]",
		Short: "show one run: its states, output, stats, failure, and whether its scope is paused now",
		Long: `show prints one run record. Given an event settlement's id (event- and 32 hexadecimal digits,
the workflow_run_uuid of a row the event path settled), which has no run record, it prints the
completion entry and the rows it settled instead.`,
		Example: `  stalesweep runs show 3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64
  stalesweep runs show 3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64 -o json
  stalesweep runs show event-5d41402abc4b2a76b9719d911017c592`,
		Args: cobra.ExactArgs(1),
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		event := executionsync.IsEndedRunID(args[0])
		if err := checkRunUUID(args[0]); err != nil && !event {
			return c.usageError(cmd, "WORKFLOW_RUN_UUID: %q %v, nor an event settlement's id (event- and 32 hexadecimal digits)", args[0], err)
		}
		fsc, _, code := c.openFirestore("runs show", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		if event {
			return c.showEventSettlement(args[0], fsc, *format)
		}
		rec, err := runstore.New(fsc).GetRun(c.ctx, args[0])
		if err != nil {
			return c.runError("runs show", args[0], err)
		}
		v := viewOf(rec)
		paused, err := pausestore.New(fsc).Covering(c.ctx, rec.WorkflowType, v.Scope, time.Now())
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep runs show: %v\n", err)
			return exitCode(exitFailed)
		}
		v.PausedNow = paused
		g, err := runstore.NewGuardStore(fsc).Get(c.ctx, runstore.GuardKey(rec.WorkflowType, v.Scope))
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep runs show: %v\n", err)
			return exitCode(exitFailed)
		}
		if since := presumedDead(rec, g, time.Now()); !since.IsZero() {
			v.PresumedDeadSince = &since
		}
		if *format == formatJSON {
			return printJSON(c.stdout, v)
		}
		return v.write(c.stdout)
	}
	return cmd
}

// eventView is what runs show prints of an event settlement: the completion entry, from the
// evidence of the rows it settled, and those rows.
type eventView struct {
	WorkflowRunUUID string         `json:"workflow_run_uuid"`
	Path            string         `json:"path"`
	EventLog        string         `json:"event_log"`
	EventInsertID   string         `json:"event_insert_id"`
	Rows            []eventRowView `json:"rows"`
}

type eventRowView struct {
	RunnerExecutionUUID string    `json:"runner_execution_uuid"`
	Outcome             string    `json:"outcome"`
	Reason              string    `json:"reason"`
	SettledAt           time.Time `json:"settled_at"`
}

// showEventSettlement prints the rows the completion entry id names settled; none is not found.
func (c *cli) showEventSettlement(id string, fsc *firestore.Client, format string) error {
	rows, err := ledger.NewExecutionStore(fsc, ledger.TxConfig{}, ledger.Retention{}).SettledBy(c.ctx, id)
	if err != nil {
		fmt.Fprintf(c.stderr, "stalesweep runs show: %v\n", err)
		return exitCode(exitFailed)
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.stderr, "stalesweep runs show: no row carries event settlement %s (an event settlement has no run record; its rows may have expired)\n", id)
		return exitCode(exitNotFound)
	}
	v := eventView{WorkflowRunUUID: id, Path: executionsync.PathEvent}
	for _, r := range rows {
		if r.Settlement == nil {
			continue // a malformed row: Malformed says why
		}
		v.EventLog, _ = r.Settlement.Evidence[executionsync.EvidenceLog].(string)
		v.EventInsertID, _ = r.Settlement.Evidence[executionsync.EvidenceInsertID].(string)
		v.Rows = append(v.Rows, eventRowView{RunnerExecutionUUID: r.UUID, Outcome: r.Outcome, Reason: r.Settlement.Reason, SettledAt: r.Settlement.At})
	}
	if format == formatJSON {
		return printJSON(c.stdout, v)
	}
	if err := printTable(c.stdout, []string{"WORKFLOW_RUN_UUID", id}, [][]string{
		{"path", "event: a completion entry, no run record (docs/architecture.md, The event path)"},
		{"event_log", v.EventLog}, {"event_insert_id", v.EventInsertID},
	}); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, "\nsettled:")
	for _, r := range v.Rows {
		fmt.Fprintf(c.stdout, "  %s/%s  %s  %s  %s\n", ledger.ExecutionsCollection, r.RunnerExecutionUUID, r.Outcome, r.Reason, stamp(r.SettledAt))
	}
	return nil
}

// runView is a run record as the runs commands print it: the record, its scope filled in for a
// record written before the field existed, and (runs show) the pause covering it now.
type runView struct {
	runstore.RunRecord
	PausedNow *pausestore.Pause `json:"paused_now,omitempty"`
	// PresumedDeadSince (runs show) is set for a run that has not ended and whose guard is gone,
	// names another run, or has expired: nothing renews it, so its process is presumed dead.
	PresumedDeadSince *time.Time `json:"presumed_dead_since,omitempty"`
}

func viewOf(r runstore.RunRecord) runView {
	r.Scope = scopeOf(r)
	return runView{RunRecord: r}
}

// write prints the run for a person: its fields, its states, then its output, stats and
// failure as indented JSON.
func (v runView) write(w io.Writer) error {
	rows := [][]string{
		{"workflow_type", v.WorkflowType}, {"scope", v.Scope}, {"status", v.Status}, {"trigger", v.Trigger},
		{"actor", v.Actor}, {"initiated_at", stamp(v.InitiatedAt)},
	}
	for _, f := range []struct {
		k  string
		at time.Time
	}{{"completed_at", v.CompletedAt}, {"failed_at", v.FailedAt}} {
		if !f.at.IsZero() {
			rows = append(rows, []string{f.k, stamp(f.at)})
		}
	}
	if v.ClaimedActor != "" {
		rows = append(rows, []string{"claimed_actor", v.ClaimedActor})
	}
	if v.IncludeDisabled {
		rows = append(rows, []string{"include_disabled", "true"})
	}
	if v.OverridePause {
		rows = append(rows, []string{"override_pause", "true"})
	}
	paused := "no"
	if v.PausedNow != nil {
		paused = "yes: " + v.PausedNow.String()
	}
	rows = append(rows, []string{"paused_now", paused})
	if v.PresumedDeadSince != nil {
		rows = append(rows, []string{"presumed_dead", "presumed dead since " + stamp(*v.PresumedDeadSince) + ": nothing renews its guard (stalesweep runs abandon ends it now; the next run of its scope does too)"})
	}
	if v.AbandonedBy != "" {
		rows = append(rows, []string{"abandoned_by", v.AbandonedBy}, []string{"abandon_reason", v.AbandonReason})
	}
	if err := printTable(w, []string{"WORKFLOW_RUN_UUID", v.WorkflowRunUUID}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nhistory:")
	for _, h := range v.History {
		fmt.Fprintf(w, "  %s  %s\n", stamp(h.At), h.State)
	}
	for _, part := range []struct {
		name string
		v    any
		show bool
	}{{"initial_data", v.InitialData, true}, {"output", v.Output, len(v.Output) > 0}, {"stats", v.Stats, len(v.Stats) > 0}, {"failure", v.Failure, v.Failure != nil}} {
		if !part.show {
			continue
		}
		b, err := json.MarshalIndent(part.v, "  ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s:\n  %s\n", part.name, b)
	}
	return nil
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("want a positive duration, got %s", s)
		}
		return now.Add(-d), nil
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a duration (24h) or an RFC 3339 time (2026-12-01T00:00:00Z), got %q", s)
	}
	return at, nil
}

// took is how long a finished run took, "-" while it runs.
func took(r runstore.RunRecord) string {
	end := r.CompletedAt
	if end.IsZero() {
		end = r.FailedAt
	}
	if end.IsZero() || r.InitiatedAt.IsZero() {
		return "-"
	}
	return end.Sub(r.InitiatedAt).Round(time.Millisecond).String()
}

// presumedDead is when a run that has not ended is presumed dead, zero while it is presumed
// alive: since its guard's lease expired (nothing renewed it), since another run took the guard
// (its acquired_at), or since the record's last update when the guard is gone.
func presumedDead(rec runstore.RunRecord, g *runstore.Guard, now time.Time) time.Time {
	switch {
	case rec.Status == workflow.StateCompleted || rec.Status == workflow.StateFailed:
		return time.Time{}
	case g == nil:
		return rec.UpdatedAt
	case g.WorkflowRunUUID != rec.WorkflowRunUUID:
		return g.AcquiredAt
	case !g.ExpiresAt.After(now):
		return g.ExpiresAt
	}
	return time.Time{}
}

// settledOf is how many rows a run settled, as its stats or output count them; "-" when they
// do not.
func settledOf(r runstore.RunRecord) string {
	var n int64
	found := false
	add := func(v any) {
		switch x := v.(type) {
		case int64:
			n, found = n+x, true
		case float64:
			n, found = n+int64(x), true
		case []any:
			n, found = n+int64(len(x)), true
		case map[string]any:
			for _, e := range x {
				if i, ok := e.(int64); ok {
					n, found = n+i, true
				}
			}
		}
	}
	if v, ok := r.Stats["settled"]; ok {
		add(v)
	} else {
		// The output fields each workflow settles rows into.
		for _, k := range []string{"settled", "swept", "reclaimed", "poisoned"} {
			if v, ok := r.Output[k]; ok {
				add(v)
			}
		}
	}
	if !found {
		return "-"
	}
	return fmt.Sprint(n)
}

func (c *cli) runsAbandonCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "abandon WORKFLOW_RUN_UUID --reason TEXT",
		Short: "end a run presumed dead now: its record failed run_abandoned, its guard released",
		Long: `abandon ends a run whose process is presumed dead (runs show says "presumed dead since") in one
transaction: its record becomes failed with failure_reason run_abandoned, your reason and you
(abandoned_by) recorded on it, and its scope's guard, when it names the run, deleted. A run whose
guard's lease is still being renewed is alive: abandon refuses it (exit 3) and says until when the
lease holds. A run that has already ended is left as it is (exit 0, "already ended").`,
		Example: `  stalesweep runs abandon 3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64 --reason "INC-7: its instance was killed"`,
		Args:    cobra.ExactArgs(1),
	}
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	reason := cmd.Flags().String("reason", "", "why, recorded on the run (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id := args[0]
		switch err := checkRunUUID(id); {
		case err != nil:
			return c.usageError(cmd, "WORKFLOW_RUN_UUID: %q %v", id, err)
		case strings.TrimSpace(*reason) == "":
			return c.usageError(cmd, "--reason: required: say why the run is ended, for whoever reads its record")
		case len(*reason) > pausestore.ReasonMax:
			return c.usageError(cmd, "--reason: at most %d bytes", pausestore.ReasonMax)
		}
		fsc, cfg, code := c.openFirestore("runs abandon", *project)
		if fsc == nil {
			return exitCode(code)
		}
		defer fsc.Close()
		runs := runstore.New(fsc)
		rec, err := runs.GetRun(c.ctx, id)
		if err != nil {
			return c.runError("runs abandon", id, err)
		}
		if rec.Status == workflow.StateCompleted || rec.Status == workflow.StateFailed {
			fmt.Fprintf(c.stdout, "run %s already ended: %s; nothing written\n", id, rec.Status)
			return nil
		}
		now, actor := time.Now().UTC(), localActor()
		expire := ledger.ExpiryAt(now, cfg.Retention, true)
		// One transaction: the record failed run_abandoned with who and why, and its guard
		// deleted, unless the guard's lease is still being renewed.
		err = runs.TransitionRun(c.ctx, id, []string{rec.Status}, workflow.StateFailed, now, runstore.RunUpdate{
			FailedAt: now, ExpireAt: expire, NotableExpireAt: expire,
			Failure: &runstore.Failure{Reason: "run_abandoned", Type: workflow.FailureTransient, Step: "operator", Layer: "workflow",
				AtState: rec.Status, Action: "abandon", Error: "ended as presumed dead by " + actor + ": " + *reason, ErrorType: "Abandoned"},
			ReleaseGuard: runstore.GuardKey(rec.WorkflowType, scopeOf(rec)), RefuseLiveAt: now,
			AbandonedBy: actor, AbandonReason: *reason,
		})
		var ended *runstore.BadTransitionError
		var held *runstore.GuardHeldError
		switch {
		case errors.As(err, &ended) && (ended.Status == workflow.StateCompleted || ended.Status == workflow.StateFailed): // it ended meanwhile
			fmt.Fprintf(c.stdout, "run %s already ended: %s; nothing written\n", id, ended.Status)
			return nil
		case errors.As(err, &held):
			fmt.Fprintf(c.stderr, "stalesweep runs abandon: run %s is alive: its guard's lease is renewed, and holds until %s; nothing written\n",
				id, held.Holder.ExpiresAt.UTC().Format(time.RFC3339))
			return exitCode(exitConflict)
		case err != nil:
			return c.runError("runs abandon", id, err)
		}
		fmt.Fprintf(c.stdout, "run %s abandoned: failed, failure_reason run_abandoned, by %s\n", id, actor)
		return nil
	}
	return cmd
}

// runError reports err of command on run id: exit 4 (not found) when there is no such run, 1
// for any other error.
func (c *cli) runError(command, id string, err error) error {
	if status.Code(err) == codes.NotFound {
		fmt.Fprintf(c.stderr, "stalesweep %s: no run %s\n", command, id)
		return exitCode(exitNotFound)
	}
	fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", command, err)
	return exitCode(exitFailed)
}
