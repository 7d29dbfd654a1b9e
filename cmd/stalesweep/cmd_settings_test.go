package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/app"
)

// The README's configuration table is what the settings list generates, and a stale one fails
// the check naming the file.
func TestTheReadmesSettingsTableIsCurrent(t *testing.T) {
	if code, _, stderr := invoke(t, "settings", "--check", "--root", "../.."); code != exitOK {
		t.Errorf("the README's settings table is not current (run: go run ./cmd/stalesweep settings): %s", stderr)
	}
	dir := t.TempDir()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(readme), "| `STALESWEEP_LOST_GRACE` |", "| `STALESWEEP_LOST_GRAC` |", 1)
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := invoke(t, "settings", "--check", "--root", dir); code != exitFailed || !strings.Contains(stderr, "README.md") {
		t.Errorf("a stale table passed the check (exit %d): %s", code, stderr)
	}
	if code, _, _ := invoke(t, "settings", "--root", dir); code != exitOK {
		t.Fatalf("writing the table failed (exit %d)", code)
	}
	if code, _, stderr := invoke(t, "settings", "--check", "--root", dir); code != exitOK {
		t.Errorf("the rewritten table fails its check: %s", stderr)
	}
}

// Every setting has a row in the README's table, generated from the list.
func TestEverySettingHasARowInTheTable(t *testing.T) {
	for _, s := range app.Settings {
		if !strings.Contains(settingsTable(), "| `"+s.Name+"` |") {
			t.Errorf("%s has no row in the table", s.Name)
		}
	}
}
