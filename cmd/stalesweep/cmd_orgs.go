package main

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// orgsCmd is `stalesweep orgs enable|disable ORG...` and `stalesweep orgs list`: the
// organizations documents the dispatcher and every sweep read (sweeps_enabled), written through
// orgadmin.
func (c *cli) orgsCmd() *cobra.Command {
	return c.group("orgs", "enable, disable and list the organizations stalesweep sweeps",
		`  stalesweep orgs enable 0f8fad5b-d9cb-469f-a165-70867728950e --reason "onboarding"
  stalesweep orgs list`,
		c.orgsSetCmd(true), c.orgsSetCmd(false), c.orgsListCmd())
}

func (c *cli) orgsSetCmd(enable bool) *cobra.Command {
	verb, done, short := "enable", "enabled", "turn sweeps on for organizations (sweeps_enabled: true)"
	long := `enable sets sweeps_enabled: true on each organization's document (organizations/{uuid}),
creating it when there is none and keeping its other fields: nothing of an organization is swept
until it is enabled. It records who (the local user), when and --reason. Enabling an enabled
organization writes nothing. The next roster rebuild (STALESWEEP_ROSTER_MAX_AGE, 10 minutes by
default) brings it into the ticks.`
	if !enable {
		verb, done, short = "disable", "disabled", "turn sweeps off for organizations (sweeps_enabled: false)"
		long = `disable sets sweeps_enabled: false on each organization's document: from then on no scheduled,
Pub/Sub or HTTP run touches its rows, whatever a roster or a message says (every run and every
settling transaction reads the document). It records who, when and --reason. Disabling a disabled
organization writes nothing.`
	}
	cmd := &cobra.Command{
		Use:     verb + " ORG... [--reason TEXT]",
		Short:   short,
		Long:    long,
		Example: fmt.Sprintf("  stalesweep orgs %s 0f8fad5b-d9cb-469f-a165-70867728950e --reason \"INC-42\"", verb),
		Args:    cobra.MinimumNArgs(1),
	}
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	reason := cmd.Flags().String("reason", "", "why, recorded on the organization's document")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		for i, org := range args {
			if err := checkOrg(org); err != nil {
				return c.usageError(cmd, "ORG %d: %q %v", i+1, org, err)
			}
		}
		if len(*reason) > orgadmin.ReasonMax {
			return c.usageError(cmd, "--reason: at most %d bytes", orgadmin.ReasonMax)
		}
		return c.withFirestore("orgs "+verb, *project, func(ctx context.Context, fsc *firestore.Client, _ app.Config) int {
			store, by := orgadmin.New(fsc), localActor()
			for _, org := range args {
				changed, err := store.SetSweeps(ctx, org, enable, by, *reason)
				if err != nil {
					fmt.Fprintf(c.stderr, "stalesweep orgs %s: %v\n", verb, err)
					return exitFailed
				}
				if changed {
					fmt.Fprintf(c.stdout, "%s: %s\n", done, org)
				} else {
					fmt.Fprintf(c.stdout, "already %s: %s (nothing to do)\n", done, org)
				}
			}
			return exitOK
		})
	}
	return cmd
}

// checkOrg says why org cannot name an organization: the workflows' inputs take an
// organization_uuid in the uuid format, so nothing else could ever be swept.
func checkOrg(org string) error {
	if err := firestoreconn.CheckDocID(org); err != nil {
		return err
	}
	if _, err := uuid.Parse(org); err != nil || len(org) != 36 {
		return fmt.Errorf("is not a uuid (8-4-4-4-12 hex digits), which organization_uuid must be")
	}
	return nil
}

func (c *cli) orgsListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--limit N] [--page-token T] [-o table|json]",
		Short: "list the organizations, enabled and disabled, with their last runs and oldest stale rows",
		Long: fmt.Sprintf(`list prints the organizations documents in id order, at most --limit of them (default %d, at
most %d), each with whether sweeps are enabled, who changed that last, when and why, the newest
run on it of each workflow scoped to an organization or its runner groups, and its oldest active row not observed for
--min-age, per provider. When there are more it ends with the page token of the next page. An
organization without a document is not listed: it is not swept either.`, orgadmin.ListDefault, orgadmin.ListMax),
		Example: `  stalesweep orgs list
  stalesweep orgs list --limit 1000 -o json`,
		Args: cobra.NoArgs,
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	limit := cmd.Flags().Int("limit", orgadmin.ListDefault, fmt.Sprintf("organizations per page, 1 to %d", orgadmin.ListMax))
	token := cmd.Flags().String("page-token", "", "the token the previous page ended with")
	minAge := cmd.Flags().Duration("min-age", fleet.MinAgeDefault, "a row not observed for this long is stale")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch err := checkFormat(*format); {
		case err != nil:
			return c.usageError(cmd, "%v", err)
		case *limit < 1 || *limit > orgadmin.ListMax:
			return c.usageError(cmd, "--limit: between 1 and %d, got %d", orgadmin.ListMax, *limit)
		case *minAge <= 0:
			return c.usageError(cmd, "--min-age: want a positive duration, got %s", *minAge)
		}
		if *token != "" {
			if err := firestoreconn.CheckDocID(*token); err != nil {
				return c.usageError(cmd, "--page-token: %q %v", *token, err)
			}
		}
		return c.withFirestore("orgs list", *project, func(ctx context.Context, fsc *firestore.Client, _ app.Config) int {
			now, err := firestoreconn.ServerClock(fsc)(ctx)
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep orgs list: %v\n", err)
				return exitFailed
			}
			page, err := orgReader(fsc).Organizations(ctx, *token, *limit, now, *minAge)
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep orgs list: %v\n", err)
				return exitFailed
			}
			if *format == formatJSON {
				_ = printJSON(c.stdout, page)
				return exitOK
			}
			rows := make([][]string, 0, len(page.Organizations))
			for _, o := range page.Organizations {
				rows = append(rows, []string{o.UUID, onOff(o.SweepsEnabled), stamp(o.SweepsChangedAt), dash(o.SweepsChangedBy), dash(o.SweepsReason),
					lastRuns(o.LastRuns), oldest(o.OldestStale)})
			}
			_ = printTable(c.stdout, []string{"ORGANIZATION_UUID", "SWEEPS", "CHANGED", "BY", "REASON", "LAST RUNS", "OLDEST STALE"}, rows)
			if page.Next != "" {
				fmt.Fprintf(c.stdout, "\nmore organizations: add --page-token %s\n", page.Next)
			}
			return exitOK
		})
	}
	return cmd
}

// orgReader reads organizations with the declared workflows and the execution syncs' rows.
func orgReader(fsc *firestore.Client) fleet.Reader {
	return fleet.Reader{
		Orgs: orgadmin.New(fsc), Runs: runstore.New(fsc), Executions: ledger.NewExecutionStore(fsc, ledger.TxConfig{}, ledger.Retention{}),
		Workflows: app.Declared(), Kinds: []executionsync.Kind{executionsync.CloudRun, executionsync.Kubernetes},
	}
}

func onOff(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lastRuns renders the newest runs for a table cell: "TYPE STATUS AT" each, ";"-separated.
func lastRuns(runs []fleet.LastRun) string {
	var parts []string
	for _, r := range runs {
		p := r.WorkflowType + " " + r.Status + " " + stamp(r.InitiatedAt)
		if strings.Contains(r.Scope, "/") { // a runner group's
			p += " on " + r.Scope
		}
		if r.FailureReason != "" {
			p += " (" + r.FailureReason + ")"
		}
		parts = append(parts, p)
	}
	return dash(strings.Join(parts, "; "))
}

// oldest renders the oldest stale rows for a table cell: "PROVIDER UUID AGE" each.
func oldest(rows []fleet.StaleRow) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %s %ds", r.Provider, r.RunnerExecutionUUID, r.AgeSeconds))
	}
	return dash(strings.Join(parts, "; "))
}
