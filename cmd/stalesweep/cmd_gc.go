package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/retention"
)

// gcCmd is `stalesweep gc`: delete stalesweep's own bookkeeping whose expire_at has passed
// (internal/retention), for the emulator and for projects without the TTL policies.
func (c *cli) gcCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc [--dry-run] [--limit N] [--collection C]",
		Short: "delete stalesweep's own bookkeeping whose expiry has passed",
		Long: `gc deletes the documents stalesweep wrote for its own bookkeeping (run records and their
receipts, guards, blind-executor judgments, the roster, pauses) whose expire_at has passed on
Firestore's clock, as the TTL policies do in production. It never touches the rows the runners,
workers and apps own. It deletes at most --limit documents a run, a run's receipts before the
run, each only if it was not written since it was read; run it again to go on. Safe to run
twice or at once.`,
		Example: `  stalesweep gc --dry-run
  stalesweep gc --limit 500 --collection sweep_runs -o json`,
		Args: cobra.NoArgs,
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	dryRun := cmd.Flags().Bool("dry-run", false, "count what would be deleted; delete nothing")
	limit := cmd.Flags().Int("limit", retention.LimitDefault, fmt.Sprintf("the most documents this run deletes, 1 to %d", retention.LimitMax))
	colls := cmd.Flags().StringArray("collection", nil, "only this collection (repeatable): "+strings.Join(retention.Collections(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("collection", cobra.FixedCompletions(retention.Collections(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		gc := retention.Config{Limit: *limit, DryRun: *dryRun, Collections: *colls}
		if *limit < 1 {
			return c.usageError(cmd, "--limit: must be from 1 to %d, got %d", retention.LimitMax, *limit)
		}
		if err := gc.Validate(); err != nil {
			return c.usageError(cmd, "--%v", err)
		}
		fs, _, code := c.openFirestore("gc", *project)
		if fs == nil {
			return exitCode(code)
		}
		defer fs.Close()
		// Expiry is judged on Firestore's clock, as its TTL policies judge it.
		ctx, cancel := context.WithTimeout(c.ctx, retention.CallTimeoutDefault)
		now, err := firestoreconn.ServerClock(fs)(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep gc: %v\n", err)
			return exitCode(exitFailed)
		}
		res, err := retention.New(fs, gc).RunOnce(c.ctx, now)
		if err != nil {
			fmt.Fprintf(c.stderr, "stalesweep gc: %v\n", err)
			return exitCode(exitFailed)
		}
		if *format == formatJSON {
			if err := printJSON(c.stdout, res); err != nil {
				return err
			}
		} else {
			rows := make([][]string, 0, len(res.Counts))
			for _, n := range res.Counts {
				rows = append(rows, []string{n.Collection, strconv.Itoa(n.Expired), strconv.Itoa(n.Deleted), strconv.Itoa(n.Raced),
					strconv.Itoa(n.Deferred), strconv.Itoa(n.Errors)})
			}
			deleted := "DELETED"
			if res.DryRun {
				deleted = "WOULD_DELETE"
			}
			if err := printTable(c.stdout, []string{"COLLECTION", "EXPIRED", deleted, "RACED", "DEFERRED", "ERRORS"}, rows); err != nil {
				return err
			}
		}
		switch {
		case res.Limited:
			fmt.Fprintf(c.stderr, "stalesweep gc: stopped at --limit %d; more may have expired: run it again\n", *limit)
		case res.OutOfBudget:
			fmt.Fprintf(c.stderr, "stalesweep gc: stopped at its budget (%s); run it again\n", retention.BudgetDefault)
		}
		if res.Error != "" {
			fmt.Fprintf(c.stderr, "stalesweep gc: some deletes failed; the first: %s\n", res.Error)
			return exitCode(exitFailed)
		}
		return nil
	}
	return cmd
}
