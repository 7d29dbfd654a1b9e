package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/retention"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// gc previews with --dry-run (JSON), then deletes the expired bookkeeping and prints its
// counts; the unexpired and the runners' rows stay.
func TestGCCommandPreviewsThenDeletesTheExpired(t *testing.T) {
	t.Parallel()
	project := testenv.Project()
	fs := testenv.FirestoreProject(t, project)
	ctx := context.Background()
	now := time.Now()
	docs := map[string]map[string]any{
		"sweep_runs/old":         {ledger.ExpireField: now.Add(-time.Hour)},
		"sweep_runs/old/syncs/a": {ledger.ExpireField: now.Add(-time.Hour)},
		"sweep_guards/g":         {ledger.ExpireField: now.Add(-time.Hour)},
		"sweep_runs/new":         {ledger.ExpireField: now.Add(time.Hour)},
		"runner_executions/e":    {"observed_at": now.Add(-9000 * time.Hour), ledger.ExpireField: now.Add(-time.Hour)},
	}
	for p, d := range docs {
		if _, err := fs.Doc(p).Set(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	left := func() int {
		n := 0
		for p := range docs {
			if snap, err := fs.Doc(p).Get(ctx); err == nil && snap.Exists() {
				n++
			}
		}
		return n
	}

	code, out, stderr := invoke(t, "gc", "--dry-run", "--project", project, "-o", "json")
	var res retention.Result
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || !res.DryRun || res.Deleted() != 3 {
		t.Fatalf("dry run: exit %d, %+v\nstdout %s\nstderr %s", code, res, out, stderr)
	}
	if n := left(); n != len(docs) {
		t.Errorf("a dry run deleted %d documents", len(docs)-n)
	}

	code, out, stderr = invoke(t, "gc", "--project", project)
	if code != exitOK || !strings.Contains(out, "COLLECTION") || !strings.Contains(out, "sweep_guards") {
		t.Fatalf("gc: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	t.Logf("stalesweep gc:\n%s", out)
	if n := left(); n != 2 {
		t.Errorf("%d documents left, want the unexpired run and the runner's row", n)
	}
	for _, p := range []string{"sweep_runs/new", "runner_executions/e"} {
		if snap, err := fs.Doc(p).Get(ctx); err != nil || !snap.Exists() {
			t.Errorf("%s is gone", p)
		}
	}
}

func TestGCCommandRefusesBadFlagsNamingThem(t *testing.T) {
	t.Parallel()
	refusesNaming(t, []refusal{
		{[]string{"gc", "--limit", "0"}, "--limit"},
		{[]string{"gc", "--limit", "50001"}, "--limit"},
		{[]string{"gc", "--collection", "runner_executions"}, "--collection"},
		{[]string{"gc", "-o", "yaml"}, "--output"},
	})
	if code, out, _ := invoke(t, "gc", "--help"); code != exitOK || !strings.Contains(out, "stalesweep gc --dry-run") {
		t.Errorf("gc --help: exit %d, %q; want 0 with an example", code, out)
	}
}
