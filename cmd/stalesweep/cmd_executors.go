package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// executorsCmd is `stalesweep executors list` and `stalesweep executors clear TARGET`: what the
// blind-executor guard judged, and the operator's clearance of a target after checking that its
// rows' executions really are gone (internal/blindguard).
func (c *cli) executorsCmd() *cobra.Command {
	var project string
	list := &cobra.Command{
		Use:     "list",
		Short:   "list the executor targets the blind-executor guard judged",
		Example: "  stalesweep executors list -o json",
		Args:    cobra.NoArgs,
	}
	format := outputFlag(list)
	list.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		return c.withFirestore("executors", project, func(ctx context.Context, fsc *firestore.Client, cfg app.Config) int {
			targets, err := targetstore.New(fsc, ledger.Retention{}).List(ctx, 1000)
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep executors: %v\n", err)
				return exitFailed
			}
			if targets == nil {
				targets = []ledger.Target{}
			}
			if *format == formatJSON {
				_ = printJSON(c.stdout, targets)
				return exitOK
			}
			rows := make([][]string, 0, len(targets))
			for _, t := range targets {
				rows = append(rows, []string{t.Target, strconv.FormatBool(t.Blind), strconv.FormatInt(t.Unknown, 10) + "/" + strconv.FormatInt(t.Asked, 10),
					stamp(t.JudgedAt), stamp(t.ClearedAt), t.ClearedBy})
			}
			_ = printTable(c.stdout, []string{"TARGET", "BLIND", "UNKNOWN/ASKED", "JUDGED", "CLEARED", "CLEARED BY"}, rows)
			return exitOK
		})
	}
	clear := &cobra.Command{
		Use:   "clear TARGET",
		Short: "clear a target after checking that its rows' executions really are gone",
		Long: `clear records the operator's clearance of an executor target: rows unknown to it since before
now are taken as gone and settle lost after the grace; later NotFounds count against it again.
TARGET is as list prints it: cloud_run:projects/P/locations/L or kubernetes:CLUSTER, and one the
guard knows (judged, or named by a row); any other is refused (exit 2) with the nearest known
target, unless --force.`,
		Example: "  stalesweep executors clear cloud_run:projects/my-project/locations/europe-west1",
		Args:    cobra.ExactArgs(1),
	}
	force := clear.Flags().Bool("force", false, "clear a target the guard does not know (never judged, named by no row), with a warning")
	clear.RunE = func(cmd *cobra.Command, args []string) error {
		target := args[0]
		if err := checkTarget(target); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		return c.withFirestore("executors", project, func(ctx context.Context, fsc *firestore.Client, cfg app.Config) int {
			// Only a target the guard knows is cleared: a typo would write a made-up target
			// and leave the real one blind.
			store := targetstore.New(fsc, ledger.Retention{})
			known, err := store.Known(ctx, target)
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep executors: %v\n", err)
				return exitFailed
			}
			switch {
			case !known && !*force:
				fmt.Fprintf(c.stderr, "stalesweep executors clear: %s is no target the blind-executor guard knows (never judged, and no row names it)%s; stalesweep executors list shows the targets, and --force clears it anyway\n",
					target, nearestTarget(ctx, store, target))
				return exitInvalid
			case !known:
				fmt.Fprintf(c.stderr, "stalesweep executors clear: warning: %s is no target the blind-executor guard knows; clearing it anyway (--force)\n", target)
			}
			// The clearance is stamped on Firestore's clock, as the rows' unknown spells are
			// compared with it wherever the functions run.
			now, err := firestoreconn.ServerClock(fsc)(ctx)
			if err == nil {
				err = targetstore.New(fsc, cfg.Retention).Clear(ctx, target, localActor(), now)
			}
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep executors: %v\n", err)
				return exitFailed
			}
			fmt.Fprintf(c.stderr, "stalesweep executors: cleared %s at %s: rows unknown to it since before now are taken as gone and settle lost after the grace; later NotFounds count against it again\n",
				target, now.UTC().Format(time.RFC3339))
			return exitOK
		})
	}
	for _, sub := range []*cobra.Command{list, clear} {
		sub.Flags().StringVar(&project, "project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	}
	return c.group("executors list | clear TARGET", "what the blind-executor guard judged; clear a target after checking", `  stalesweep executors list
  stalesweep executors clear cloud_run:projects/my-project/locations/europe-west1`, list, clear)
}

// stamp renders a time for a table: RFC 3339 in UTC, or "-" for none.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// checkTarget refuses what cannot be an executor target's name.
func checkTarget(target string) error {
	if rest, ok := strings.CutPrefix(target, "kubernetes:"); ok && rest != "" && !strings.ContainsAny(rest, "/ ") {
		return nil
	}
	if rest, ok := strings.CutPrefix(target, "cloud_run:projects/"); ok {
		if p, l, ok := strings.Cut(rest, "/locations/"); ok && p != "" && l != "" && !strings.ContainsAny(p+l, "/ ") {
			return nil
		}
	}
	return fmt.Errorf("TARGET: want cloud_run:projects/P/locations/L or kubernetes:CLUSTER, got %q", target)
}

// nearestTarget is ", did you mean T?" for the known target nearest to target by edit distance,
// or "" when none is near (or none is known).
func nearestTarget(ctx context.Context, store *targetstore.Store, target string) string {
	targets, err := store.List(ctx, 1000)
	if err != nil {
		return ""
	}
	best, dist := "", len(target)/2+1 // farther than this is no typo of it
	for _, t := range targets {
		if d := editDistance(target, t.Target); d < dist {
			best, dist = t.Target, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
