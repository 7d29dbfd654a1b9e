package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"cloud.google.com/go/run/apiv2/runpb"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// commands lists every command of the tree, the root's own children first.
func commands(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range cmd.Commands() {
		out = append(out, sub)
		out = append(out, commands(sub)...)
	}
	return out
}

func TestEveryCommandHasHelpWithAnExampleAndExitsZero(t *testing.T) {
	root := (&cli{ctx: context.Background()}).root()
	all := commands(root)
	if len(all) < 10 {
		t.Fatalf("only %d commands found", len(all))
	}
	for _, cmd := range all {
		path := strings.Fields(cmd.CommandPath())[1:]
		if cmd.Example == "" {
			t.Errorf("%v has no example", path)
		}
		for _, h := range []string{"--help", "-h"} {
			code, stdout, stderr := invoke(t, append(path, h)...)
			if code != exitOK || !strings.Contains(stdout, "Usage:") || !strings.Contains(stdout, "Examples:") || stderr != "" {
				t.Errorf("%v %s: exit %d, stdout %q, stderr %q; want 0 and the usage with an example", path, h, code, stdout, stderr)
			}
		}
	}
	if code, stdout, _ := invoke(t, "help", "run"); code != exitOK || !strings.Contains(stdout, "stalesweep run WORKFLOW_TYPE") {
		t.Errorf("help run: exit %d, %q", code, stdout)
	}
}

func TestAnUnknownCommandSuggestsTheNearest(t *testing.T) {
	for typo, want := range map[string]string{"rn": "run", "explian": "explain", "indexs": "indexes", "executor": "executors"} {
		code, _, stderr := invoke(t, typo)
		if code != exitInvalid || !strings.Contains(stderr, "Did you mean this?") || !strings.Contains(stderr, "\t"+want+"\n") {
			t.Errorf("%s: exit %d, stderr %q; want %d suggesting %s", typo, code, stderr, exitInvalid, want)
		}
	}
	for _, group := range []string{"executors", "runs", "pauses"} {
		code, _, stderr := invoke(t, group, "lst")
		if code != exitInvalid || !strings.Contains(stderr, "Did you mean this?\n\tlist") {
			t.Errorf("%s lst: exit %d, stderr %q; want %d suggesting list", group, code, stderr, exitInvalid)
		}
	}
}

func TestVersionNamesTheBuild(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := invoke(t, args...)
		if code != exitOK || !strings.HasPrefix(stdout, "stalesweep ") || !strings.Contains(stdout, "go1.") {
			t.Errorf("%v: exit %d, %q", args, code, stdout)
		}
	}
	version = "v9.9.9"
	t.Cleanup(func() { version = "" })
	if _, stdout, _ := invoke(t, "version"); !strings.HasPrefix(stdout, "stalesweep v9.9.9") {
		t.Errorf("with -X main.version: %q", stdout)
	}
}

func TestShellCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, _ := invoke(t, "completion", sh)
		if code != exitOK || !strings.Contains(stdout, "stalesweep") || len(stdout) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, code, len(stdout))
		}
	}
	// What a shell asks for: the workflow types after run, the formats after -o.
	_, stdout, _ := invoke(t, cobra.ShellCompRequestCmd, "run", "runner.")
	for _, want := range []string{"runner.execution-sync-stale-cloud-run", "runner.workspace-lease-settle"} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("completing run runner.: %q lacks %s", stdout, want)
		}
	}
	_, stdout, _ = invoke(t, cobra.ShellCompRequestCmd, "executors", "list", "-o", "")
	if !strings.Contains(stdout, "json\n") || !strings.Contains(stdout, "table\n") {
		t.Errorf("completing -o: %q", stdout)
	}
}

// The read commands take -o table|json and refuse anything else naming the flag.
func TestReadCommandsTakeOutputTableOrJSON(t *testing.T) {
	root := (&cli{ctx: context.Background()}).root()
	for _, path := range readCommands {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Flags().Lookup("output") == nil || cmd.Flags().Lookup("output").Shorthand != "o" {
			t.Errorf("%v: no -o/--output flag (%v)", path, err)
			continue
		}
		args := append(append([]string{}, path...), "-o", "yaml")
		switch path[len(path)-1] {
		case "explain":
			args = append(args, "runner_executions/x")
		case "show":
			args = append(args, "x")
		}
		if code, _, stderr := invoke(t, args...); code != exitInvalid || !strings.Contains(stderr, "--output") {
			t.Errorf("%v: exit %d, stderr %q; want %d naming --output", args, code, stderr, exitInvalid)
		}
	}
}

// readCommands are the commands that only read; each takes -o table|json.
var readCommands = [][]string{{"executors", "list"}, {"explain"}, {"runs", "list"}, {"runs", "show"}, {"pauses", "list"}, {"gc"}}

func TestRunGivesScriptsItsUUIDAndStatusAndAConflictExitsThree(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	staleRow(t, fs, fake, org, "row-1", func(name string, at time.Time) *runpb.Execution {
		return cloudrunfake.Succeeded(name, at)
	})
	data := `{"organization_uuid": "` + org + `"}`
	code, stdout, stderr := invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", data, "-o", "run")
	var res runResult
	if code != exitOK || json.Unmarshal([]byte(stdout), &res) != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if res.Status != "completed" || res.WorkflowType != "runner.execution-sync-stale-cloud-run" || res.DryRun || res.Output["started_count"] != float64(1) {
		t.Errorf("-o run printed %+v", res)
	}
	rec, err := runstore.New(fs).GetRun(context.Background(), res.WorkflowRunUUID)
	if err != nil || rec.Status != "completed" || rec.WorkflowType != res.WorkflowType {
		t.Errorf("the record of the uuid printed: %+v, %v", rec, err)
	}
	if !strings.Contains(stderr, "run "+res.WorkflowRunUUID+" completed") {
		t.Errorf("stderr does not name the run: %q", stderr)
	}

	// Another run holds the organization's guard: a conflict, exit 3, nothing printed.
	holder := runstore.RunRecord{WorkflowRunUUID: uuid.NewString(), WorkflowType: "runner.execution-sync-stale-cloud-run", Status: "reconciling",
		InitiatedAt: time.Now(), UpdatedAt: time.Now()}
	claim := &runstore.GuardClaim{Key: runstore.GuardKey(holder.WorkflowType, org), TTL: time.Hour,
		Guard: runstore.Guard{WorkflowRunUUID: holder.WorkflowRunUUID, WorkflowType: holder.WorkflowType, Scope: org, AcquiredAt: time.Now()}}
	if _, err := runstore.New(fs).StartRun(context.Background(), holder, claim); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = invoke(t, "run", "runner.execution-sync-stale-cloud-run", "--data", data)
	if code != exitConflict || stdout != "" || !strings.Contains(stderr, holder.WorkflowRunUUID) {
		t.Errorf("while another run holds the scope: exit %d, stdout %q, stderr %q; want %d naming the holder", code, stdout, stderr, exitConflict)
	}
}
