package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

func cmdIndexes(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("indexes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "firestore.indexes.json", "file to write; - writes stdout")
	check := fs.Bool("check", false, "fail if the file differs from what the code declares, instead of writing it")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return exitInvalid
	}
	want, err := ledger.FirebaseIndexesJSON()
	if err != nil {
		fmt.Fprintf(stderr, "stalesweep indexes: %v\n", err)
		return exitFailed
	}
	switch {
	case *out == "-":
		_, _ = stdout.Write(want)
	case *check:
		got, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(got, want) {
			fmt.Fprintf(stderr, "stalesweep indexes: %s is not current; run: go run ./cmd/stalesweep indexes\n", *out)
			return exitFailed
		}
	default:
		if err := os.WriteFile(*out, want, 0o644); err != nil {
			fmt.Fprintf(stderr, "stalesweep indexes: %v\n", err)
			return exitFailed
		}
	}
	return exitOK
}
