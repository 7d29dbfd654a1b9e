package tfstandin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
)

// Install builds the stand-in provider from the module at root and installs it under dir as a
// filesystem mirror (the unpacked layout) of every provider it stands in for, at the version
// its schema was generated from. It returns the path of a Terraform CLI configuration that
// installs those providers from the mirror and from nowhere else: with TF_CLI_CONFIG_FILE set
// to it, `terraform init` needs no network.
func Install(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "terraform-provider-standin")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./internal/testkit/tfstandin/provider")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the stand-in provider: %v\n%s", err, out)
	}
	mirror := filepath.Join(dir, "mirror")
	for _, name := range Names() {
		p, err := Load(name)
		if err != nil {
			return "", err
		}
		platform := runtime.GOOS + "_" + runtime.GOARCH
		at := filepath.Join(mirror, filepath.FromSlash(p.Source), p.Version, platform)
		if err := os.MkdirAll(at, 0o755); err != nil {
			return "", err
		}
		if err := os.Link(bin, filepath.Join(at, "terraform-provider-"+name+"_v"+p.Version)); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(dir, "terraformrc")
	text := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %s\n  }\n}\n", strconv.Quote(mirror))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return "", err
	}
	return cfg, nil
}
