// Package seeds reads the workflow seeds (internal/contract/testdata/seeds), the contract each
// workflow's run record is held to, for the tests that check a workflow's output against its
// seed. Test code only: no product package imports it.
package seeds

import (
	"os"
	"strings"
	"testing"
)

// Dir is where the seeds are, from the folder of a package under internal/ (a test's working
// directory).
const Dir = "../contract/testdata/seeds/"

// OutputFields reads the output field names of the seed in file (under Dir), and fails the test
// when the file cannot be read or lists fewer than ten.
func OutputFields(t testing.TB, file string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(Dir + file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	start, end := strings.Index(s, "Output Schema"), strings.Index(s, "States")
	fields := map[string]bool{}
	for _, line := range strings.Split(s[start:end], "\n") {
		if name, _, ok := strings.Cut(line, " |"); ok && !strings.HasPrefix(line, "|") {
			fields[strings.TrimSpace(name)] = true
		}
	}
	if len(fields) < 10 {
		t.Fatalf("read only %d output fields from the seed", len(fields))
	}
	return fields
}
