package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed alerts.tf.json and the metrics table of docs/operations.md are what the list
// generates; --check fails on a stale or missing one, naming it, and a write makes both current.
func TestAlertsCheck(t *testing.T) {
	if code, _, stderr := invoke(t, "alerts", "--check", "--root", "../.."); code != exitOK {
		t.Errorf("the committed alerts files are not current: %s", stderr)
	}
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "terraform"), 0o755)
	_ = os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	doc := filepath.Join(dir, "docs", "operations.md")
	_ = os.WriteFile(doc, []byte("# Operations\n"), 0o600)
	if code, _, stderr := invoke(t, "alerts", "--root", dir); code != exitFailed || !strings.Contains(stderr, "alerts:begin") {
		t.Errorf("a document without the table's lines: exit %d, %s", code, stderr)
	}
	committed, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(doc, []byte(strings.Replace(string(committed), "| `rows_lost` |", "| `rows_gone` |", 1)), 0o600)
	code, _, stderr := invoke(t, "alerts", "--check", "--root", dir)
	if code != exitFailed || !strings.Contains(stderr, "operations.md") || !strings.Contains(stderr, "alerts.tf.json") {
		t.Errorf("--check passed a missing Terraform file or an edited table (exit %d): %s", code, stderr)
	}
	if code, stdout, _ := invoke(t, "alerts", "--root", dir); code != exitOK || !strings.Contains(stdout, "alerts.tf.json") {
		t.Fatalf("writing the alerts files failed (exit %d)", code)
	}
	if code, _, stderr := invoke(t, "alerts", "--check", "--root", dir); code != exitOK {
		t.Errorf("freshly written files do not pass --check: %s", stderr)
	}
	if got, _ := os.ReadFile(doc); string(got) != string(committed) {
		t.Error("writing the table changed more of the document than the table")
	}
}
