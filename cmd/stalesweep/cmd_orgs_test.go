package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

func TestOrgsRefuseBadArgumentsNamingThem(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "never-reached")
	org := uuid.NewString()
	refusesNaming(t, []refusal{
		{[]string{"orgs", "enable", "not-a-uuid"}, `ORG 1: "not-a-uuid"`},
		{[]string{"orgs", "disable", org, "a/b"}, `ORG 2: "a/b"`},
		{[]string{"orgs", "enable"}, "arg"},
		{[]string{"orgs", "enable", org, "--reason", strings.Repeat("x", orgadmin.ReasonMax+1)}, "--reason"},
		{[]string{"orgs", "list", "--limit", "0"}, "--limit"},
		{[]string{"orgs", "list", "--limit", "1001"}, "--limit"},
		{[]string{"orgs", "list", "-o", "yaml"}, "--output"},
		{[]string{"orgs", "list", "--page-token", "a/b"}, "--page-token"},
		{[]string{"orgs", "nope"}, "unknown command"},
	})
}

func TestOrgsEnableDisableAndListThroughTheLedgerTheSweepsRead(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	a, b := "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	staleRow(t, fs, fake, a, "row-a", cloudrunfake.Running)

	// Not enabled: the sweep refuses it.
	data := `{"organization_uuid": "` + a + `"}`
	if code, _, stderr := invoke(t, "run", syncType, "--data", data); code == exitOK {
		t.Fatalf("a run of an organization never enabled succeeded: %s", stderr)
	}
	if code, out, stderr := invoke(t, "orgs", "enable", a, b, "--reason", "onboarding"); code != exitOK || out != "enabled: "+a+"\nenabled: "+b+"\n" {
		t.Fatalf("enable: exit %d, %q, %q", code, out, stderr)
	}
	if code, out, _ := invoke(t, "orgs", "enable", a); code != exitOK || !strings.Contains(out, "already enabled: "+a) {
		t.Errorf("enable again: exit %d, %q", code, out)
	}
	if ok, err := orgadmin.New(fs).Enabled(t.Context(), a); err != nil || !ok {
		t.Fatalf("the ledger says enabled %t, %v", ok, err)
	}
	if code, _, stderr := invoke(t, "run", syncType, "--data", data); code != exitOK {
		t.Fatalf("a run of an enabled organization: exit %d, %s", code, stderr)
	}
	group := "00000000-0000-4000-8000-0000000000c1"
	if _, err := fs.Collection(ledger.RunnerGroupsCollection).Doc(group).Set(t.Context(), map[string]any{"organization_uuid": a, "heartbeat_timeout_seconds": 60}); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := invoke(t, "run", "runner.workspace-lease-settle", "--data", `{"organization_uuid": "`+a+`", "runner_group_uuid": "`+group+`"}`); code != exitOK {
		t.Fatalf("a lease settle of an enabled organization: exit %d, %s", code, stderr)
	}
	if code, out, _ := invoke(t, "orgs", "disable", b, "--reason", "INC-7"); code != exitOK || out != "disabled: "+b+"\n" {
		t.Errorf("disable: exit %d, %q", code, out)
	}

	code, out, stderr := invoke(t, "orgs", "list", "-o", "json")
	if code != exitOK {
		t.Fatalf("list: exit %d, %s", code, stderr)
	}
	var page fleet.OrgPage
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("list -o json: %v: %s", err, out)
	}
	if len(page.Organizations) != 2 || page.Next != "" {
		t.Fatalf("listed %+v", page)
	}
	oa, ob := page.Organizations[0], page.Organizations[1]
	if oa.UUID != a || !oa.SweepsEnabled || oa.SweepsChangedBy != localActor() || oa.SweepsReason != "onboarding" || oa.SweepsChangedAt.IsZero() {
		t.Errorf("organization a: %+v", oa)
	}
	if ob.UUID != b || ob.SweepsEnabled || ob.SweepsReason != "INC-7" {
		t.Errorf("organization b: %+v", ob)
	}
	byType := map[string]fleet.LastRun{}
	for _, r := range oa.LastRuns {
		byType[r.WorkflowType] = r
	}
	if len(oa.LastRuns) != 2 || byType[syncType].Status != "completed" || byType[syncType].Scope != a ||
		byType["runner.workspace-lease-settle"].Scope != a+"/"+group {
		t.Errorf("a's last runs: %+v, want the sync's on %s and the lease settle's on its group", oa.LastRuns, a)
	}
	// The row is still running on Cloud Run, so the run refreshed it: not stale any more.
	if len(oa.OldestStale) != 0 || len(ob.LastRuns) != 0 {
		t.Errorf("a's oldest stale %+v, b's last runs %+v", oa.OldestStale, ob.LastRuns)
	}

	staleRow(t, fs, fake, b, "row-b", cloudrunfake.Running)
	code, out, _ = invoke(t, "orgs", "list", "--limit", "1")
	if code != exitOK || !strings.Contains(out, a) || strings.Contains(out, b) || !strings.Contains(out, "more organizations: add --page-token "+a) {
		t.Errorf("first page of one: exit %d\n%s", code, out)
	}
	code, out, _ = invoke(t, "orgs", "list", "--limit", "1", "--page-token", a)
	if code != exitOK || !strings.Contains(out, b) || !strings.Contains(out, "disabled") || !strings.Contains(out, "cloud_run row-b") || strings.Contains(out, "more organizations") {
		t.Errorf("second page: exit %d\n%s", code, out)
	}
}
