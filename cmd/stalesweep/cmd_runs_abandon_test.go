package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// startedRun writes what the engine writes when a run starts on org's scope: its record and its
// guard, whose lease the run last renewed at renewed for lease.
func startedRun(t *testing.T, runs *runstore.Store, org string, renewed time.Time, lease time.Duration) string {
	t.Helper()
	id := uuid.NewString()
	rec := runstore.RunRecord{WorkflowRunUUID: id, WorkflowType: syncType, Status: "reconciling", Trigger: "schedule", Scope: org,
		InitialData: map[string]any{"organization_uuid": org}, InitiatedAt: renewed, UpdatedAt: renewed}
	if _, err := runs.StartRun(context.Background(), rec, &runstore.GuardClaim{Key: runstore.GuardKey(syncType, org), TTL: lease,
		Guard: runstore.Guard{WorkflowRunUUID: id, WorkflowType: syncType, Scope: org, AcquiredAt: renewed}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// runs show says which runs nothing renews; runs abandon ends those at once and refuses a run
// whose lease is being renewed.
func TestRunsAbandonEndsADeadRunAndRefusesALiveOne(t *testing.T) {
	fs := commandFirestore(t)
	runs := runstore.New(fs)
	deadOrg, liveOrg := uuid.NewString(), uuid.NewString()
	lastRenewal := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	dead := startedRun(t, runs, deadOrg, lastRenewal, 30*time.Second)
	live := startedRun(t, runs, liveOrg, time.Now().UTC(), 30*time.Second)

	code, stdout, _ := invoke(t, "runs", "show", dead, "-o", "json")
	var shown map[string]any
	if err := json.Unmarshal([]byte(stdout), &shown); code != exitOK || err != nil {
		t.Fatalf("runs show: exit %d %v %s", code, err, stdout)
	}
	if since, _ := shown["presumed_dead_since"].(string); since != lastRenewal.Add(30*time.Second).Format(time.RFC3339) {
		t.Errorf("presumed_dead_since = %v, want the lease's end", shown["presumed_dead_since"])
	}
	if code, stdout, _ := invoke(t, "runs", "show", dead); code != exitOK || !strings.Contains(stdout, "presumed dead since ") {
		t.Errorf("runs show of a dead run: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := invoke(t, "runs", "show", live); code != exitOK || strings.Contains(stdout, "presumed dead") {
		t.Errorf("runs show of a live run: exit %d\n%s", code, stdout)
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{dead}, exitInvalid, "--reason"},
		{[]string{dead, "--reason", " "}, exitInvalid, "--reason"},
		{[]string{"a/b", "--reason", "x"}, exitInvalid, "WORKFLOW_RUN_UUID"},
		{[]string{uuid.NewString(), "--reason", "x"}, exitNotFound, "no run"},
		{[]string{live, "--reason", "x"}, exitConflict, "until "},
	} {
		code, _, stderr := invoke(t, append([]string{"runs", "abandon"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("runs abandon %v: exit %d %q, want %d saying %q", c.args, code, stderr, c.code, c.says)
		}
	}
	if rec, _ := runs.GetRun(context.Background(), live); rec.Status != "reconciling" {
		t.Errorf("the live run was ended: %s", rec.Status)
	}

	// The ended record is kept as long as the configured notable retention says, not the default.
	t.Setenv("STALESWEEP_RETENTION_NOTABLE", "400d")
	before := time.Now()
	if code, stdout, stderr := invoke(t, "runs", "abandon", dead, "--reason", "INC-7: its instance was killed"); code != exitOK || !strings.Contains(stdout, "abandoned") {
		t.Fatalf("runs abandon of a dead run: exit %d %s %s", code, stdout, stderr)
	}
	rec, err := runs.GetRun(context.Background(), dead)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != "failed" || rec.Failure == nil || rec.Failure.Reason != "run_abandoned" || rec.AbandonReason != "INC-7: its instance was killed" ||
		!strings.HasPrefix(rec.AbandonedBy, "local:") || rec.FailedAt.IsZero() {
		t.Errorf("abandoned record: %+v %+v", rec, rec.Failure)
	}
	if keep := rec.ExpireAt.Sub(before); keep < 400*24*time.Hour || keep > 400*24*time.Hour+time.Minute {
		t.Errorf("abandoned record expires %s after the abandonment, want the notable retention set, 400 days", keep)
	}
	if g, err := runstore.NewGuardStore(fs).Get(context.Background(), runstore.GuardKey(syncType, deadOrg)); err != nil || g != nil {
		t.Errorf("the dead run's guard: %+v %v, want it deleted", g, err)
	}
	if code, stdout, _ := invoke(t, "runs", "abandon", dead, "--reason", "again"); code != exitOK || !strings.Contains(stdout, "already ended") {
		t.Errorf("runs abandon of an ended run: exit %d %s", code, stdout)
	}
	if code, stdout, _ := invoke(t, "runs", "list", "--workflow", syncType, "--scope", deadOrg); code != exitOK ||
		!strings.Contains(stdout, "SETTLED") || !strings.Contains(stdout, "FAILURE_REASON") || !strings.Contains(stdout, "run_abandoned") {
		t.Errorf("runs list: exit %d\n%s", code, stdout)
	}
}
