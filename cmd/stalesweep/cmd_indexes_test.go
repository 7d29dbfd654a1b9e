package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Outside the repository root, indexes writes nothing and names the root it wants; --check there
// says the files are not found, not that they are stale.
func TestIndexesOutsideTheRepositoryRootRefusesBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := invoke(t, "indexes", "--root", dir)
	if code != exitInvalid || !strings.Contains(stderr, "is not the repository root") || !strings.Contains(stderr, "terraform") {
		t.Errorf("indexes outside the root: exit %d, stdout %q, stderr %q; want exit %d naming the root it wants", code, stdout, stderr, exitInvalid)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("indexes outside the root wrote %d files (%s first)", len(entries), entries[0].Name())
	}
	code, _, stderr = invoke(t, "indexes", "--check", "--root", dir)
	if code != exitFailed || !strings.Contains(stderr, filepath.Join(dir, "firestore.indexes.json")+" not found") || strings.Contains(stderr, "not current") {
		t.Errorf("--check outside the root: exit %d, stderr %q; want exit %d saying not found", code, stderr, exitFailed)
	}
}

func TestFirestoreIndexesJSONIsCurrent(t *testing.T) {
	want, err := firebaseIndexesJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../firestore.indexes.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("firestore.indexes.json is not what indexes.Composite declares; run: go run ./cmd/stalesweep indexes\n%s", want)
	}
}
