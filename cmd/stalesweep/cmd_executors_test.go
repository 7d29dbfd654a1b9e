package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// executors clear takes only a target the guard knows: a made-up one, or a mistyped region, is
// refused (exit 2) naming the nearest known target, and nothing is written; --force clears it
// with a warning; a name no target can have is refused whatever the flags.
func TestExecutorsClearRefusesATargetTheGuardDoesNotKnow(t *testing.T) {
	fs := commandFirestore(t)
	ctx := context.Background()
	const real = "cloud_run:projects/p9/locations/europe-west9"
	store := targetstore.New(fs, ledger.Retention{})
	if _, err := store.Record(ctx, ledger.Target{Target: real, Blind: true, JudgedAt: time.Now(), Asked: 30, Unknown: 30}); err != nil {
		t.Fatal(err)
	}
	for _, typo := range []string{"cloud_run:projects/p9/locations/europe-west-9", "kubernetes:bogus"} {
		code, _, stderr := invoke(t, "executors", "clear", typo)
		near := strings.Contains(stderr, "did you mean "+real+"?")
		if code != exitInvalid || !strings.Contains(stderr, "no target the blind-executor guard knows") || near != strings.HasPrefix(typo, "cloud_run") {
			t.Errorf("clear %s: exit %d, stderr %q; want %d, naming %s when near", typo, code, stderr, exitInvalid, real)
		}
		if _, found, err := store.Get(ctx, typo); err != nil || found {
			t.Errorf("clear %s wrote a target (found %t, %v)", typo, found, err)
		}
	}
	if code, _, stderr := invoke(t, "executors", "clear", "bogus"); code != exitInvalid || !strings.Contains(stderr, "kubernetes:CLUSTER") {
		t.Errorf("clear bogus: exit %d, stderr %q; want %d naming the target forms", code, stderr, exitInvalid)
	}
	if got, _, _ := store.Get(ctx, real); !got.Blind {
		t.Errorf("a refused clear cleared the real target: %+v", got)
	}
	code, _, stderr := invoke(t, "executors", "clear", "kubernetes:new-cluster", "--force")
	if code != exitOK || !strings.Contains(stderr, "warning:") || !strings.Contains(stderr, "cleared kubernetes:new-cluster") {
		t.Errorf("clear --force: exit %d, stderr %q; want 0 with a warning", code, stderr)
	}
	if code, _, stderr := invoke(t, "executors", "clear", real); code != exitOK || !strings.Contains(stderr, "cleared "+real) {
		t.Errorf("clear of the known target: exit %d, %s", code, stderr)
	}
}

// A row's target is known to the guard once a sync recorded it; and a target that answered, healthy,
// is listed with its counts.
func TestExecutorsListShowsAHealthyTargetThatAnswered(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	staleRow(t, fs, fake, org, "row-ok", func(name string, at time.Time) *runpb.Execution { return cloudrunfake.Running(name, at) })
	if code, _, stderr := invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", `{"organization_uuid": "`+org+`"}`); code != exitOK {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	const target = "cloud_run:projects/p/locations/l"
	code, stdout, stderr := invoke(t, "executors", "list", "-o", "json")
	var listed []ledger.Target
	if code != exitOK || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed) != 1 || listed[0].Target != target || listed[0].Blind || listed[0].Asked != 1 {
		t.Fatalf("list after a healthy sync: exit %d, %s %s; want %s, not blind, asked 1", code, stdout, stderr, target)
	}
	code, stdout, _ = invoke(t, "executors", "list")
	if code != exitOK || !strings.Contains(stdout, target) || !strings.Contains(stdout, "0/1") {
		t.Errorf("list as a table: exit %d, %s", code, stdout)
	}
}
