package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// explain reads a row of each age-settled collection and says what its workflow would do, in
// text and in JSON; a row that does not exist exits 4; and it writes nothing.
func TestExplainAnAppInvocationATaskAndALease(t *testing.T) {
	project := testenv.Project()
	t.Setenv("GOOGLE_CLOUD_PROJECT", project)
	fs := testenv.FirestoreProject(t, project)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)

	runs := ledgertest.ExtensionRuns{Client: fs, Now: testenv.Fixed(old)}
	if err := runs.Start(ctx, ledger.ExtensionRun{RunID: "r1", TenantID: "t", ExtensionID: "e", JobName: "j", Background: true}, old); err != nil {
		t.Fatal(err)
	}
	tasks := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(old)}
	for _, q := range []string{"builds", "default"} {
		if err := tasks.Enqueue(ctx, q, "a", "slug-a", old); err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.Next(ctx, q, "w", old); err != nil {
			t.Fatal(err)
		}
	}
	leases := ledgertest.Leases{Client: fs, Now: testenv.Fixed(old)}
	org, group, lease := uuid.NewString(), uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org)
	if err := leases.PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 300}); err != nil {
		t.Fatal(err)
	}
	if err := leases.Acquire(ctx, ledger.WorkspaceLease{UUID: lease, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: "ws",
		HolderUUID: uuid.NewString()}, old); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ arg, verdict, rule string }{
		{"extension_runs/r1", "abandon", "idle_past_deadline"},
		{"tasks/builds/a", "reclaim", "silent_past_ttl"},
		{"tasks/a", "reclaim", "silent_past_ttl"}, // the default queue
		{"workspace_leases/" + lease, "abandon", "holder_unresolvable_heartbeat_stale"},
	} {
		code, stdout, stderr := invoke(t, "explain", c.arg)
		if code != exitOK || !strings.Contains(stdout, "A scan sees it now") || !strings.Contains(stdout, "Verdict: "+c.verdict) ||
			!strings.Contains(stdout, "(rule: "+c.rule+")") || !strings.Contains(stdout, "The row as stored") {
			t.Errorf("explain %s: exit %d\n%s%s", c.arg, code, stdout, stderr)
		}
		code, stdout, stderr = invoke(t, "explain", c.arg, "-o", "json")
		var e struct {
			Verdict string `json:"verdict"`
			Rule    string `json:"rule"`
			Visible bool   `json:"visible"`
			Row     map[string]any
		}
		if code != exitOK || json.Unmarshal([]byte(stdout), &e) != nil || e.Verdict != c.verdict || e.Rule != c.rule || !e.Visible || e.Row["status"] == nil {
			t.Errorf("explain %s -o json: exit %d, %+v\n%s%s", c.arg, code, e, stdout, stderr)
		}
	}
	for _, arg := range []string{"extension_runs/nope", "tasks/builds/nope", "tasks/nope", "workspace_leases/nope"} {
		if code, _, stderr := invoke(t, "explain", arg); code != exitNotFound || !strings.Contains(stderr, "no such document") {
			t.Errorf("explain %s: exit %d (%s), want %d", arg, code, stderr, exitNotFound)
		}
	}
	if code, _, stderr := invoke(t, "explain", "tasks/a/b/c"); code != exitInvalid || !strings.Contains(stderr, "tasks/QUEUE/TASK_ID") {
		t.Errorf("explain tasks/a/b/c: exit %d (%s)", code, stderr)
	}
	if r, _ := ledgertest.Value(ledger.NewExtensionRunStore(fs, ledger.TxConfig{}).Row(ctx, "r1")); r.Status != ledger.ExtensionRunning {
		t.Errorf("explain changed the run: %+v", r)
	}
	if l, _ := ledgertest.Value(ledger.NewLeaseStore(fs, ledger.TxConfig{}).Row(ctx, lease)); l.Status != ledger.LeaseActive {
		t.Errorf("explain changed the lease: %+v", l)
	}
	if task, _ := ledgertest.Value(ledger.NewTaskStore(fs, ledger.TxConfig{}).Row(ctx, "builds", "a")); task.Status != ledger.TaskWorking {
		t.Errorf("explain changed the task: %+v", task)
	}
}
