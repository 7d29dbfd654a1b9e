package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// cmdIndexes writes (or, with --check, checks) the files generated from ledger.Indexes:
// firestore.indexes.json (Firebase CLI) and terraform/firestore_indexes.tf.json (the module), and
// from ledger.ExpiringCollections: terraform/firestore_ttl.tf.json (the TTL policies).
// With --gcloud it prints instead the gcloud commands that create the indexes in a project.
func cmdIndexes(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("indexes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the repository root the files are under")
	check := fs.Bool("check", false, "fail if a file differs from what the code declares, instead of writing it")
	gcloud := fs.Bool("gcloud", false, "print the gcloud commands that create the indexes in --project, one per line, instead of writing files")
	project := fs.String("project", "", "with --gcloud: the project")
	database := fs.String("database", "(default)", "with --gcloud: the Firestore database")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	if *gcloud {
		if *project == "" {
			fmt.Fprintln(stderr, "stalesweep indexes: --gcloud needs --project")
			return exitInvalid
		}
		for _, c := range ledger.GcloudIndexCommands(*project, *database) {
			fmt.Fprintln(stdout, c)
		}
		return exitOK
	}
	files := []struct {
		path   string
		render func() ([]byte, error)
	}{
		{"firestore.indexes.json", ledger.FirebaseIndexesJSON},
		{filepath.Join("terraform", "firestore_indexes.tf.json"), ledger.TerraformIndexesJSON},
		{filepath.Join("terraform", "firestore_ttl.tf.json"), ledger.TerraformTTLJSON},
	}
	code := exitOK
	for _, f := range files {
		want, err := f.render()
		if err != nil {
			fmt.Fprintf(stderr, "stalesweep indexes: %v\n", err)
			return exitFailed
		}
		path := filepath.Join(*root, f.path)
		if *check {
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				fmt.Fprintf(stderr, "stalesweep indexes: %s is not current; run: go run ./cmd/stalesweep indexes\n", path)
				code = exitFailed
			}
			continue
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			fmt.Fprintf(stderr, "stalesweep indexes: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	return code
}
