package main

import (
	"github.com/spf13/cobra"

	"github.com/stalesweep/stalesweep/internal/app"
)

// settingsCmd writes (or, with --check, checks) the README's configuration table, generated from
// the settings table that ConfigFromEnv reads the environment by.
func (c *cli) settingsCmd() *cobra.Command {
	var root string
	var check bool
	cmd := &cobra.Command{
		Use:   "settings [--check] [--root DIR]",
		Short: "write or check the README's table of environment settings, generated from the one list the process reads them by",
		Long: `settings writes the configuration table of README.md from the list in internal/app that every
process reads its environment by. With --check it writes nothing and exits 1 when the table is not
what the list generates.`,
		Example: `  stalesweep settings
  stalesweep settings --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(c.generate("settings", root, check, []generated{{app.SettingsDocFile, spliced(root, app.SettingsDocFile, app.SpliceSettings)}}))
		},
	}
	cmd.Flags().StringVar(&root, "root", ".", "the repository root the file is under")
	cmd.Flags().BoolVar(&check, "check", false, "fail if the table differs from what the list generates, instead of writing it")
	return cmd
}
