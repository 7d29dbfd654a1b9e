// Command terraform-provider-standin serves a stand-in for the google or the archive Terraform
// provider: the provider's schema, generated from its published cdktf assembly
// (internal/testkit/tfstandin), and plans, but no calls to anything. Terraform starts it as a plugin;
// which provider it stands in for is read from the name it is installed under
// (terraform-provider-google_v6.50.0 serves google). scripts/terraform-check.sh installs it into
// a local filesystem mirror and runs terraform validate and plan against it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tfprotov5/tf5server"

	"github.com/stalesweep/stalesweep/internal/testkit/tfstandin"
)

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "terraform-provider-")
	name, _, _ = strings.Cut(name, "_")
	p, err := tfstandin.Load(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "terraform-provider-standin: install me as terraform-provider-NAME_vVERSION with NAME one of %v: %v\n", tfstandin.Names(), err)
		os.Exit(2)
	}
	srv, err := tfstandin.NewServer(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "terraform-provider-standin:", err)
		os.Exit(1)
	}
	if err := tf5server.Serve(p.Source, func() tfprotov5.ProviderServer { return srv }); err != nil {
		fmt.Fprintln(os.Stderr, "terraform-provider-standin:", err)
		os.Exit(1)
	}
}
