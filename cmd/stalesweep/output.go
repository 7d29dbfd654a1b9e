package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Output formats of the read commands (-o).
const (
	formatTable = "table"
	formatJSON  = "json"
)

// outputFlag adds -o/--output to a read command, table by default, and completes its values.
func outputFlag(cmd *cobra.Command) *string {
	format := cmd.Flags().StringP("output", "o", formatTable, "output format: table or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{formatTable, formatJSON}, cobra.ShellCompDirectiveNoFileComp))
	return format
}

// checkFormat refuses a format other than table and json, naming the flag.
func checkFormat(format string) error {
	if format != formatTable && format != formatJSON {
		return fmt.Errorf("--output: want table or json, got %q", format)
	}
	return nil
}

// printJSON writes v as indented JSON, HTML left unescaped (a name with <&> prints as it is).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printTable writes a header and rows, tab-aligned.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}

// usageError is a command's own usage error: said on stderr with the command's usage line, exit 2.
func (c *cli) usageError(cmd *cobra.Command, format string, args ...any) error {
	fmt.Fprintf(c.stderr, "%s: %s\n", cmd.CommandPath(), fmt.Sprintf(format, args...))
	fmt.Fprintf(c.stderr, "usage: %s\nRun \"%s --help\" for an example.\n", cmd.UseLine(), cmd.CommandPath())
	return exitCode(exitInvalid)
}
