package main

import (
	"github.com/spf13/cobra"
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
			return exit(c.generate("alerts", root, check, []generated{
				{alertsTerraformFile, alertsTerraformJSON},
				{alertsDocFile, spliced(root, alertsDocFile, spliceAlertsDoc)},
			}))
		},
	}
	cmd.Flags().StringVar(&root, "root", ".", "the repository root the files are under")
	cmd.Flags().BoolVar(&check, "check", false, "fail if a file differs from what the list generates, instead of writing it")
	return cmd
}
