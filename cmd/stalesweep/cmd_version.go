package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time (-ldflags "-X main.version=v1.2.3"); otherwise the module's
// version and the VCS revision the binary was built from are read from its build info.
var version = ""

// versionString names this build: its version, the commit it was built from (with "+dirty" when
// the tree had changes), and the Go that built it.
func versionString() string {
	v, rev, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) { // a pseudo-version names it already
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		v += " (" + rev + ")"
	}
	return v + " " + runtime.Version()
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print stalesweep's version, the commit it was built from, and its Go",
		Example: "  stalesweep version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(c.stdout, "stalesweep "+versionString())
			return err
		},
	}
}
