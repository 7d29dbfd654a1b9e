package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed log_sinks.tf.json is what the executors' signals generate; --check fails on a
// stale or missing one, naming it, and a write makes it current.
func TestSinksCheck(t *testing.T) {
	if code, _, stderr := invoke(t, "sinks", "--check", "--root", "../.."); code != exitOK {
		t.Errorf("the committed sink filters are not current: %s", stderr)
	}
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "terraform"), 0o755)
	if code, _, stderr := invoke(t, "sinks", "--check", "--root", dir); code != exitFailed || !strings.Contains(stderr, "log_sinks.tf.json") {
		t.Errorf("--check passed a missing file (exit %d): %s", code, stderr)
	}
	committed, err := os.ReadFile("../../" + sinksTerraformFile)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sinksTerraformFile)
	_ = os.WriteFile(path, []byte(strings.Replace(string(committed), `\"Completed\" OR `, "", 1)), 0o600)
	if code, _, stderr := invoke(t, "sinks", "--check", "--root", dir); code != exitFailed || !strings.Contains(stderr, "log_sinks.tf.json") {
		t.Errorf("--check passed an edited filter (exit %d): %s", code, stderr)
	}
	if code, stdout, _ := invoke(t, "sinks", "--root", dir); code != exitOK || !strings.Contains(stdout, "log_sinks.tf.json") {
		t.Fatalf("writing the sink filters failed (exit %d)", code)
	}
	if got, _ := os.ReadFile(path); string(got) != string(committed) {
		t.Error("a fresh write differs from the committed file")
	}
}
