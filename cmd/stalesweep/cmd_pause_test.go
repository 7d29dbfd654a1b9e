package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

const syncType = "runner.execution-sync-stale-cloud-run"

func TestTheNewCommandsHaveHelpWithAnExample(t *testing.T) {
	for _, args := range [][]string{{"pause"}, {"resume"}, {"pauses"}, {"pauses", "list"}, {"runs"}, {"runs", "list"}, {"runs", "show"}} {
		code, stdout, stderr := invoke(t, append(args, "--help")...)
		if code != exitOK || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "stalesweep "+args[0]) {
			t.Errorf("%v --help: exit %d, stdout %q, stderr %q; want 0 and an example", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"pause", ""}, {"resume", "pm"}, {"runs", "list", "--workflow", ""}, {"pauses", "list", "--workflow", ""}} {
		code, stdout, _ := invoke(t, append([]string{"__complete"}, args...)...)
		if code != exitOK || !strings.Contains(stdout, "pm.sweep") {
			t.Errorf("completing %v: exit %d, %q; want the workflow types", args, code, stdout)
		}
	}
}

func TestThePauseAndRunsCommandsRefuseBadInputNamingTheFlag(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "never-reached")
	org := uuid.NewString()
	refusesNaming(t, []refusal{
		{[]string{"pause", "runner.unknown", "--reason", "x"}, "WORKFLOW_TYPE"},
		{[]string{"pause", syncType}, "--reason"},
		{[]string{"pause", syncType, "--reason", " "}, "--reason"},
		{[]string{"pause", syncType, "--reason", "x", "--scope", "not-a-uuid"}, "--scope"},
		{[]string{"pause", syncType, "--reason", "x", "--scope", org + "/extra"}, "--scope"},
		{[]string{"pause", "platform.extension.runs.sweep", "--reason", "x", "--scope", org}, "--scope"},
		{[]string{"pause", syncType, "--reason", "x", "--for", "-1h"}, "--for"},
		{[]string{"pause", syncType, "--reason", "x", "--for", "800h"}, "--for"},
		{[]string{"resume", "runner.unknown"}, "WORKFLOW_TYPE"},
		{[]string{"resume", "pm.sweep", "--scope", "a/b"}, "--scope"},
		{[]string{"pauses"}, "list"},
		{[]string{"pauses", "list", "--workflow", "nope"}, "--workflow"},
		{[]string{"pauses", "list", "-o", "yaml"}, "--output"},
		{[]string{"runs", "list", "--scope", org}, "--scope"},
		{[]string{"runs", "list", "--workflow", "nope"}, "--workflow"},
		{[]string{"runs", "list", "--status", "done"}, "--status"},
		{[]string{"runs", "list", "--limit", "0"}, "--limit"},
		{[]string{"runs", "list", "--limit", "501"}, "--limit"},
		{[]string{"runs", "list", "--since", "yesterday"}, "--since"},
		{[]string{"runs", "list", "--since", "-2h"}, "--since"},
		{[]string{"runs", "list", "--page-token", "bogus!"}, "--page-token"},
		{[]string{"runs", "show"}, "arg"},
		{[]string{"runs", "show", "a/b"}, "WORKFLOW_RUN_UUID"},
		{[]string{"runs", "show", "no-such-run"}, "WORKFLOW_RUN_UUID"},
	})
}

func TestPauseStopsTheRunCommandUntilOverriddenOrResumed(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org, other := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org, other)
	staleRow(t, fs, fake, org, "row-paused", cloudrunfake.Succeeded)
	staleRow(t, fs, fake, other, "row-other", cloudrunfake.Succeeded)

	code, stdout, stderr := invoke(t, "pause", syncType, "--scope", org, "--reason", "INC-42", "--for", "2h")
	if code != exitOK || !strings.Contains(stdout, "INC-42") {
		t.Fatalf("pause: exit %d, %s %s", code, stdout, stderr)
	}
	if code, _, _ := invoke(t, "pause", syncType, "--scope", org, "--reason", "INC-42, still"); code != exitOK {
		t.Fatalf("pausing again: exit %d", code)
	}
	code, stdout, _ = invoke(t, "pauses", "list", "-o", "json")
	var listed struct {
		Pauses []struct {
			pausestore.Pause
			Active bool `json:"active"`
		} `json:"pauses"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); code != exitOK || err != nil {
		t.Fatalf("pauses list: exit %d, %v: %s", code, err, stdout)
	}
	if len(listed.Pauses) != 1 || listed.Pauses[0].Scope != org || listed.Pauses[0].Reason != "INC-42, still" ||
		!listed.Pauses[0].Active || !listed.Pauses[0].Until.IsZero() || !strings.HasPrefix(listed.Pauses[0].PausedBy, "local:") {
		t.Errorf("pauses list: %+v, want the one pause as last put (no end)", listed.Pauses)
	}
	if code, stdout, _ := invoke(t, "pauses", "list"); code != exitOK || !strings.Contains(stdout, "WORKFLOW_TYPE") || !strings.Contains(stdout, org) {
		t.Errorf("pauses list table: exit %d\n%s", code, stdout)
	}

	data := `{"organization_uuid": "` + org + `"}`
	code, stdout, stderr = invoke(t, "run", syncType, "--data", data)
	if code != exitPaused || stdout != "" || !strings.Contains(stderr, "INC-42") || !strings.Contains(stderr, "--override-pause") {
		t.Errorf("run of a paused scope: exit %d, stdout %q, stderr %q; want %d naming the pause and --override-pause", code, stdout, stderr, exitPaused)
	}
	if outcome(t, fs, "row-paused") != nil {
		t.Error("the refused run settled the row")
	}
	if code, _, stderr := invoke(t, "run", syncType, "--data", `{"organization_uuid": "`+other+`"}`); code != exitOK || outcome(t, fs, "row-other") != "succeeded" {
		t.Errorf("another organization's run: exit %d %s", code, stderr)
	}
	if code, _, stderr := invoke(t, "run", syncType, "--data", data, "--override-pause"); code != exitOK || outcome(t, fs, "row-paused") != "succeeded" {
		t.Errorf("--override-pause: exit %d %s, row %v", code, stderr, outcome(t, fs, "row-paused"))
	}

	for i, want := range []string{"resumed:", "not paused:"} {
		if code, stdout, _ := invoke(t, "resume", syncType, "--scope", org); code != exitOK || !strings.HasPrefix(stdout, want) {
			t.Errorf("resume %d: exit %d %q, want %q", i, code, stdout, want)
		}
	}
	if code, stdout, _ := invoke(t, "pauses", "list", "-o", "json"); code != exitOK || !strings.Contains(stdout, `"pauses": []`) {
		t.Errorf("after resume: %s", stdout)
	}
	staleRow(t, fs, fake, org, "row-after", cloudrunfake.Succeeded)
	if code, _, stderr := invoke(t, "run", syncType, "--data", data); code != exitOK || outcome(t, fs, "row-after") != "succeeded" {
		t.Errorf("after resume: exit %d %s", code, stderr)
	}
}

func TestRunsListPagesNewestFirstAndRunsShowSaysWhetherItIsPaused(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	var runs []string
	for i := range 3 {
		staleRow(t, fs, fake, org, "row-"+string(rune('a'+i)), cloudrunfake.Succeeded)
		if code, _, stderr := invoke(t, "run", syncType, "--data", `{"organization_uuid": "`+org+`"}`); code != exitOK {
			t.Fatalf("run %d: exit %d %s", i, code, stderr)
		}
	}
	type page struct {
		Runs []struct {
			WorkflowRunUUID string `json:"workflow_run_uuid"`
			Scope           string `json:"scope"`
			Status          string `json:"status"`
			InitiatedAt     time.Time
		} `json:"runs"`
		Next string `json:"next_page_token"`
	}
	args := []string{"runs", "list", "--workflow", syncType, "--scope", org, "--status", "completed", "--since", "1h", "--limit", "2", "-o", "json"}
	var seen []string
	tok := ""
	for pages := 0; ; pages++ {
		a := args
		if tok != "" {
			a = append(append([]string{}, args...), "--page-token", tok)
		}
		code, stdout, stderr := invoke(t, a...)
		var p page
		if err := json.Unmarshal([]byte(stdout), &p); code != exitOK || err != nil {
			t.Fatalf("runs list: exit %d, %v: %s %s", code, err, stdout, stderr)
		}
		for _, r := range p.Runs {
			if r.Scope != org || r.Status != "completed" {
				t.Errorf("listed %+v", r)
			}
			seen = append(seen, r.WorkflowRunUUID)
		}
		if p.Next == "" {
			break
		}
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		tok = p.Next
	}
	if len(seen) != 3 {
		t.Fatalf("listed %d runs over its pages, want 3: %v", len(seen), seen)
	}
	runs = seen
	code, stdout, _ := invoke(t, "runs", "list", "--workflow", syncType, "--limit", "1")
	if code != exitOK || !strings.Contains(stdout, "WORKFLOW_RUN_UUID") || !strings.Contains(stdout, runs[0]) || !strings.Contains(stdout, "--page-token ") {
		t.Errorf("runs list table: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = invoke(t, "runs", "show", runs[0], "-o", "json")
	var shown map[string]any
	if err := json.Unmarshal([]byte(stdout), &shown); code != exitOK || err != nil {
		t.Fatalf("runs show: exit %d %v %s", code, err, stdout)
	}
	if shown["workflow_run_uuid"] != runs[0] || shown["scope"] != org || shown["output"] == nil || shown["history"] == nil || shown["paused_now"] != nil {
		t.Errorf("runs show: %v", shown)
	}
	if code, _, _ := invoke(t, "pause", syncType, "--reason", "fleet-wide freeze"); code != exitOK {
		t.Fatal("pause")
	}
	code, stdout, _ = invoke(t, "runs", "show", runs[0])
	if code != exitOK || !strings.Contains(stdout, "paused_now") || !strings.Contains(stdout, "yes: ") || !strings.Contains(stdout, "fleet-wide freeze") || !strings.Contains(stdout, "history:") {
		t.Errorf("runs show of a paused workflow: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := invoke(t, "runs", "show", "0f8fad5b-d9cb-469f-a165-000000000000"); code != exitNotFound || !strings.Contains(stderr, "0f8fad5b-d9cb-469f-a165-000000000000") {
		t.Errorf("runs show of a missing run: exit %d %q, want %d", code, stderr, exitNotFound)
	}
}

// explain shows the pause among the checks a scan makes, whichever workflow explains the row.
func TestExplainSaysWhenTheRowsWorkflowIsPausedOnItsScope(t *testing.T) {
	_, _, _ = cloudRunWorld(t)
	org := uuid.NewString()
	testExplainers["test_rows"] = func(_ context.Context, _ *app.App, id string, _ explain.Options) (explain.Explanation, error) {
		e := explain.Explanation{Collection: "test_rows", ID: id, WorkflowType: syncType, Scope: org, Verdict: "keep", Rule: "test",
			Checks: []explain.Check{{Name: "stale", OK: true}}}
		e.Decided()
		return e, nil
	}
	t.Cleanup(func() { delete(testExplainers, "test_rows") })
	visible := func() (bool, string) {
		t.Helper()
		code, stdout, stderr := invoke(t, "explain", "test_rows/r1", "-o", "json")
		var e explain.Explanation
		if err := json.Unmarshal([]byte(stdout), &e); code != exitOK || err != nil {
			t.Fatalf("explain: exit %d %v %s %s", code, err, stdout, stderr)
		}
		last := e.Checks[len(e.Checks)-1]
		if paused := !last.OK; (e.Verdict == "skip" && e.Rule == "paused") != paused {
			t.Errorf("paused %t: verdict %s (%s)", paused, e.Verdict, e.Rule)
		}
		return e.Visible, last.Name + ": " + last.Detail
	}
	if ok, check := visible(); !ok || !strings.HasPrefix(check, "not paused") {
		t.Errorf("unpaused: visible %t, last check %q", ok, check)
	}
	if code, _, _ := invoke(t, "pause", syncType, "--scope", org, "--reason", "INC-9"); code != exitOK {
		t.Fatal("pause")
	}
	if ok, check := visible(); ok || !strings.Contains(check, "INC-9") {
		t.Errorf("paused: visible %t, last check %q; want not visible, naming the pause", ok, check)
	}
}

// resume without --scope, when scoped pauses of the workflow hold, says which it leaves and how to
// resume each; with none held it says nothing more.
func TestResumeFleetWideListsTheScopedPausesItLeaves(t *testing.T) {
	project := testenv.Project()
	t.Setenv("GOOGLE_CLOUD_PROJECT", project)
	testenv.FirestoreProject(t, project)
	if code, stdout, _ := invoke(t, "resume", "pm.sweep"); code != exitOK || strings.Contains(stdout, "still paused") {
		t.Errorf("resume with nothing paused: exit %d, %q", code, stdout)
	}
	for _, q := range []string{"builds", "deploys"} {
		if code, _, stderr := invoke(t, "pause", "pm.sweep", "--scope", q, "--reason", "INC-7"); code != exitOK {
			t.Fatalf("pause %s: exit %d %s", q, code, stderr)
		}
	}
	code, stdout, stderr := invoke(t, "resume", "pm.sweep")
	if code != exitOK || !strings.HasPrefix(stdout, "not paused: pm.sweep on the fleet") || !strings.Contains(stdout, "still paused on 2 scope(s)") ||
		!strings.Contains(stdout, "stalesweep resume pm.sweep --scope builds") || !strings.Contains(stdout, "stalesweep resume pm.sweep --scope deploys") {
		t.Errorf("resume pm.sweep with two scoped pauses: exit %d, stdout %q, stderr %q; want both listed with their resume", code, stdout, stderr)
	}
	if code, stdout, _ := invoke(t, "resume", "pm.sweep", "--scope", "builds"); code != exitOK || strings.Contains(stdout, "still paused") {
		t.Errorf("resume --scope: exit %d, %q; want no list", code, stdout)
	}
}
