package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/alerts"
)

// alertsCmd writes (or, with --check, checks) what is generated from alerts.Metrics:
// terraform/alerts.tf.json (the logs-based metrics, alert policies and dashboard of the module)
// and the metrics table of docs/operations.md.
func (c *cli) alertsCmd() *cobra.Command {
	var root string
	var check bool
	cmd := &cobra.Command{
		Use:   "alerts [--check] [--root DIR]",
		Short: "write or check the logs-based metrics, alert policies and dashboard generated from the list of log events",
		Long: `alerts writes terraform/alerts.tf.json — a logs-based metric per listed log event, an alert
policy for the ones that page, and one dashboard — and the metrics table of docs/operations.md,
from the one list in internal/alerts. With --check it writes nothing and exits 1 when either file
is not what the list generates.`,
		Example: `  stalesweep alerts
  stalesweep alerts --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tf, err := alerts.TerraformJSON()
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep alerts: %v\n", err)
				return exitCode(exitFailed)
			}
			docPath := filepath.Join(root, alerts.DocFile)
			doc, err := os.ReadFile(docPath)
			if err != nil {
				fmt.Fprintf(c.stderr, "stalesweep alerts: %v\n", err)
				return exitCode(exitFailed)
			}
			if doc, err = alerts.SpliceDoc(doc); err != nil {
				fmt.Fprintf(c.stderr, "stalesweep alerts: %v\n", err)
				return exitCode(exitFailed)
			}
			code := exitOK
			for _, f := range []struct {
				path string
				want []byte
			}{{filepath.Join(root, alerts.TerraformFile), tf}, {docPath, doc}} {
				if check {
					if got, err := os.ReadFile(f.path); err != nil || !bytes.Equal(got, f.want) {
						fmt.Fprintf(c.stderr, "stalesweep alerts: %s is not current; run: go run ./cmd/stalesweep alerts\n", f.path)
						code = exitFailed
					}
					continue
				}
				if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
					fmt.Fprintf(c.stderr, "stalesweep alerts: %v\n", err)
					return exitCode(exitFailed)
				}
				fmt.Fprintf(c.stdout, "wrote %s\n", f.path)
			}
			if code != exitOK {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", ".", "the repository root the files are under")
	cmd.Flags().BoolVar(&check, "check", false, "fail if a file differs from what the list generates, instead of writing it")
	return cmd
}
