package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// indexesCmd writes (or, with --check, checks) the files generated from indexes.Composite:
// firestore.indexes.json (Firebase CLI) and terraform/firestore_indexes.tf.json (the module), and
// from indexes.Expiring: terraform/firestore_ttl.tf.json (the TTL policies).
// With --gcloud it prints instead the gcloud commands that create the indexes in a project.
func (c *cli) indexesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "indexes [--check] [--gcloud --project P]",
		Short: "write or check the index files, or print gcloud commands",
		Long: `indexes regenerates firestore.indexes.json and terraform/firestore_indexes.tf.json from the
one index list in code, and terraform/firestore_ttl.tf.json (the TTL policies) from the list of
expiring collections; --check fails (exit 1) when a file differs instead of writing it. With
--gcloud it prints the gcloud commands that create the indexes in a project, one per line.
The files are under the repository root (--root, default the current folder): a root without
terraform/ is refused (exit 2) before any file is written.`,
		Example: `  stalesweep indexes
  stalesweep indexes --check
  stalesweep indexes --gcloud --project=my-project | sh`,
		Args: cobra.NoArgs,
	}
	root := cmd.Flags().String("root", ".", "the repository root the files are under")
	check := cmd.Flags().Bool("check", false, "fail if a file differs from what the code declares, instead of writing it")
	gcloud := cmd.Flags().Bool("gcloud", false, "print the gcloud commands that create the indexes in --project, one per line, instead of writing files")
	project := cmd.Flags().String("project", "", "with --gcloud: the project")
	database := cmd.Flags().String("database", "(default)", "with --gcloud: the Firestore database")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *gcloud {
			if *project == "" {
				return c.usageError(cmd, "--gcloud needs --project")
			}
			for _, line := range gcloudIndexCommands(*project, *database) {
				fmt.Fprintln(c.stdout, line)
			}
			return nil
		}
		return exit(c.generate("indexes", *root, *check, []generated{
			{"firestore.indexes.json", firebaseIndexesJSON},
			{filepath.Join("terraform", "firestore_indexes.tf.json"), terraformIndexesJSON},
			{filepath.Join("terraform", "firestore_ttl.tf.json"), terraformTTLJSON},
		}))
	}
	return cmd
}

// generated is one file generated from a list in code.
type generated struct {
	path   string // under the repository root
	render func() ([]byte, error)
}

// spliced renders a document under root whose generated part splice puts into the rest of it as
// it is there.
func spliced(root, path string, splice func([]byte) ([]byte, error)) func() ([]byte, error) {
	return func() ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		return splice(b)
	}
}

// generate writes files under root, or with check says which differ from what the code
// declares (exit 1) and writes nothing. Every file is rendered before any is written: one that
// cannot be rendered leaves them all as they were.
func (c *cli) generate(name, root string, check bool, files []generated) int {
	want := make([][]byte, len(files))
	for i, f := range files {
		var err error
		if want[i], err = f.render(); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
			return exitFailed
		}
	}
	if !check {
		// A root without the files' folders is not the repository's: refuse before writing any
		// file, rather than leave one written and fail on the next.
		for _, f := range files {
			dir := filepath.Dir(filepath.Join(root, f.path))
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				fmt.Fprintf(c.stderr, "stalesweep %s: %s is not the repository root: it has no %s; run it from the root of the stalesweep repository (the folder holding %s), or pass --root DIR; nothing written\n",
					name, root, dir, wants(files))
				return exitInvalid
			}
		}
	}
	code := exitOK
	for i, f := range files {
		path := filepath.Join(root, f.path)
		if check {
			got, err := os.ReadFile(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				fmt.Fprintf(c.stderr, "stalesweep %s: %s not found: is %s the repository root (the folder holding %s)? run it from there, or pass --root DIR\n",
					name, path, root, wants(files))
				code = exitFailed
			case err != nil:
				fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
				code = exitFailed
			case !bytes.Equal(got, want[i]):
				fmt.Fprintf(c.stderr, "stalesweep %s: %s is not current; run: go run ./cmd/stalesweep %s\n", name, path, name)
				code = exitFailed
			}
			continue
		}
		if err := os.WriteFile(path, want[i], 0o644); err != nil {
			fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
			return exitFailed
		}
		fmt.Fprintf(c.stdout, "wrote %s\n", path)
	}
	return code
}

// wants names what a repository root holds for these files: their paths, as the root has them.
func wants(files []generated) string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	return strings.Join(paths, ", ")
}
