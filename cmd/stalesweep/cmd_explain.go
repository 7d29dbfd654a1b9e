package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/explain"
)

// testExplainers are collections a test explains with an explainer of its own; the product's
// are the declared workflows' (app.Explained), each explained by its own workflow.
var testExplainers = map[string]func(ctx context.Context, a *app.App, id string, o explain.Options) (explain.Explanation, error){}

// explained lists, sorted, the collections explain knows.
func explained() []string {
	return slices.Sorted(slices.Values(append(app.Explained(), slices.Collect(maps.Keys(testExplainers))...)))
}

// explainer is the explainer of coll in a.
func explainer(a *app.App, coll string) app.Explainer {
	if ex, ok := testExplainers[coll]; ok {
		return func(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
			return ex(ctx, a, id, o)
		}
	}
	if ex, ok := a.Explainers[coll]; ok {
		return ex
	}
	return func(context.Context, string, explain.Options) (explain.Explanation, error) {
		return explain.Explanation{}, fmt.Errorf("%s: no workflow of this build explains it", coll)
	}
}

func (c *cli) explainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain COLLECTION/ID",
		Short: "say why a row was, or would be, settled or left alone",
		Long: `explain reads one row and says whether a scan of its workflow sees it now (scope enabled,
staleness field valid, age against the threshold, paused), what its executor says now, the
verdict the workflow's decision returns and which rule decided it, and what stalesweep recorded
on it last. It writes nothing.`,
		Example: `  stalesweep explain runner_executions/6f1c0a52-3b8e-4c47-9f2a-6a7e1f0f9d11
  stalesweep explain tasks/task-42 -o json
  stalesweep explain runner_executions/6f1c0a52-3b8e-4c47-9f2a-6a7e1f0f9d11 --no-executor`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			var out []string
			for _, k := range explained() {
				out = append(out, k+"/")
			}
			return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
		},
	}
	format := outputFlag(cmd)
	project := cmd.Flags().String("project", "", "Google Cloud project (default $GOOGLE_CLOUD_PROJECT)")
	noExec := cmd.Flags().Bool("no-executor", false, "do not ask the executor; decide on the stored row alone")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkFormat(*format); err != nil {
			return c.usageError(cmd, "%v", err)
		}
		coll, id, ok := strings.Cut(args[0], "/")
		if !ok || id == "" || !slices.Contains(explained(), coll) {
			return c.usageError(cmd, "want COLLECTION/ID with COLLECTION one of %s, got %q",
				strings.Join(explained(), ", "), args[0])
		}
		if err := app.CheckExplainID(coll, id); err != nil {
			return c.usageError(cmd, "%s: %v", args[0], err)
		}
		// In text mode the explanation says what the log lines would: only warnings and worse
		// are logged, as plain text, so that no JSON is mixed into what a person reads.
		a, code := c.openAppLogging("explain", *project, *format != formatJSON)
		if a == nil {
			return exitCode(code)
		}
		defer a.Close()
		e, err := explainer(a, coll)(c.ctx, id, explain.Options{NoExecutor: *noExec})
		switch {
		case errors.Is(err, app.ErrNoRow):
			fmt.Fprintf(c.stderr, "stalesweep explain: %s: %v\n", args[0], err)
			return exitCode(exitNotFound)
		case err != nil:
			fmt.Fprintf(c.stderr, "stalesweep explain: %v\n", err)
			return exitCode(exitFailed)
		}
		if err := checkPaused(c.ctx, a, &e); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep explain: %v\n", err)
			return exitCode(exitFailed)
		}
		if *format == formatJSON {
			return printJSON(c.stdout, e)
		}
		return writeExplanation(c.stdout, e)
	}
	return cmd
}

// humanLog is a log for a person at a terminal: plain key=value text without the time, at WARN
// and worse (or level, if higher).
func humanLog(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: max(level, slog.LevelWarn),
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}
