package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// exitCase is one command line, the environment it runs in and the exit code it must end with.
type exitCase struct {
	name string
	args []string
	// env is laid over the case's base: the test's emulator project when emu, otherwise a
	// Firestore refused at 127.0.0.1:1 (so that a case reaching Firestore would exit 1). An
	// empty value unsets the variable.
	env  map[string]string
	emu  bool // runs against the emulator, in table order (the cases before it set its state)
	want int
}

// badSettings are settings every command that reaches Firestore refuses before it opens it: exit
// 2, the message naming the variable once.
var badSettings = []struct{ name, variable, value string }{
	{"firestore timeout not a duration", "STALESWEEP_FIRESTORE_TIMEOUT", "soon"},
	{"firestore timeout below its bound", "STALESWEEP_FIRESTORE_TIMEOUT", "100ms"},
	{"cloud run endpoint off loopback", "STALESWEEP_CLOUD_RUN_ENDPOINT", "10.0.0.1:9090"},
	{"cloud run endpoint not host:port", "STALESWEEP_CLOUD_RUN_ENDPOINT", "localhost"},
	{"kube clusters not JSON", "STALESWEEP_KUBE_CLUSTERS", `{"clusters": `},
	{"kube cluster plain http off loopback", "STALESWEEP_KUBE_CLUSTERS", `{"clusters": {"eu": {"host": "http://10.0.0.1:6443", "token_file": "/t"}}}`},
	{"kube cluster https without token_file", "STALESWEEP_KUBE_CLUSTERS", `{"clusters": {"eu": {"host": "https://10.0.0.1:6443"}}}`},
	{"kube cluster reachable two ways", "STALESWEEP_KUBE_CLUSTERS", `{"clusters": {"eu": {"host": "https://127.0.0.1:6443", "in_cluster": true}}}`},
	{"log level", "STALESWEEP_LOG_LEVEL", "loud"},
	{"sync concurrency", "STALESWEEP_SYNC_CONCURRENCY", "0"},
	{"retention", "STALESWEEP_RETENTION", "1h"},
}

// TestExitCodes holds every command to docs/operations.md's table of exit codes: each class of
// bad argument and bad setting, each answer Firestore can give, on the built binary.
func TestExitCodes(t *testing.T) {
	bin := newBinary(t)
	fake, fs, project := cloudRunWorld(t)
	ctx := context.Background()
	enabled, optedOut, held, orgToggle := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, enabled, held)
	if err := (ledgertest.Organizations{Client: fs}).Put(ctx, ledger.Organization{UUID: optedOut, SweepsEnabled: false}); err != nil {
		t.Fatal(err)
	}
	staleRow(t, fs, fake, enabled, "row-1", cloudrunfake.Succeeded)
	// Another run holds the scope of held.
	holder := runstore.RunRecord{WorkflowRunUUID: uuid.NewString(), WorkflowType: "runner.execution-sync-stale-cloud-run", Status: "reconciling", Scope: held,
		InitiatedAt: time.Now(), UpdatedAt: time.Now()}
	claim := &runstore.GuardClaim{Key: runstore.GuardKey(holder.WorkflowType, held), TTL: time.Hour,
		Guard: runstore.Guard{WorkflowRunUUID: holder.WorkflowRunUUID, WorkflowType: holder.WorkflowType, Scope: held, AcquiredAt: time.Now()}}
	if _, err := runstore.New(fs).StartRun(ctx, holder, claim); err != nil {
		t.Fatal(err)
	}
	// A run whose process died an hour ago: its guard's lease ran out long since.
	dead := runstore.RunRecord{WorkflowRunUUID: uuid.NewString(), WorkflowType: "pm.sweep", Status: "pending",
		InitiatedAt: time.Now().Add(-time.Hour), UpdatedAt: time.Now().Add(-time.Hour), Scope: "queue:exit-codes-dead"}
	deadClaim := &runstore.GuardClaim{Key: runstore.GuardKey(dead.WorkflowType, dead.Scope), TTL: 30 * time.Second,
		Guard: runstore.Guard{WorkflowRunUUID: dead.WorkflowRunUUID, WorkflowType: dead.WorkflowType, Scope: dead.Scope, AcquiredAt: dead.InitiatedAt}}
	if _, err := runstore.New(fs).StartRun(ctx, dead, deadClaim); err != nil {
		t.Fatal(err)
	}
	data := func(org string) string { return `{"organization_uuid": "` + org + `"}` }
	syncCR := []string{"run", "runner.execution-sync-stale-cloud-run", "--data"}

	cases := []exitCase{
		// Usage: cobra's and the commands' own.
		{name: "no command", want: exitInvalid},
		{name: "unknown command", args: []string{"nope"}, want: exitInvalid},
		{name: "unknown subcommand", args: []string{"runs", "nope"}, want: exitInvalid},
		{name: "group without subcommand", args: []string{"orgs"}, want: exitInvalid},
		{name: "unknown flag", args: []string{"runs", "list", "--bogus"}, want: exitInvalid},
		{name: "missing argument", args: []string{"runs", "show"}, want: exitInvalid},
		{name: "repeated single-valued flag", args: []string{"runs", "list", "--workflow", "pm.sweep", "--workflow", "pm.sweep"}, want: exitInvalid},
		{name: "bad -o", args: []string{"runs", "list", "-o", "yaml"}, want: exitInvalid},
		{name: "bad --data JSON", args: append(syncCR, `{"organization_uuid": `), want: exitInvalid},
		{name: "invalid field", args: append(syncCR, `{"organization_uuid": "not-a-uuid"}`), want: exitInvalid},
		{name: "unknown field", args: append(syncCR, `{"organization_uuid": "`+enabled+`", "x": 1}`), want: exitInvalid},
		{name: "unknown workflow", args: []string{"run", "runner.unknown", "--data", "{}"}, want: exitInvalid},
		{name: "pm sweep bad ttl", args: []string{"pm", "sweep", "--ttl", "0"}, want: exitInvalid},
		{name: "explain unknown collection", args: []string{"explain", "nope/x"}, want: exitInvalid},
		{name: "explain task id with two slashes", args: []string{"explain", "tasks/a/b/c"}, want: exitInvalid},
		{name: "runs show not a uuid", args: []string{"runs", "show", "not-a-uuid"}, want: exitInvalid},
		{name: "runs abandon not a uuid", args: []string{"runs", "abandon", "not-a-uuid", "--reason", "test"}, want: exitInvalid},
		{name: "runs abandon without --reason", args: []string{"runs", "abandon", "3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64"}, want: exitInvalid},
		{name: "runs list bad --since", args: []string{"runs", "list", "--since", "yesterday"}, want: exitInvalid},
		{name: "pause unknown workflow", args: []string{"pause", "nope"}, want: exitInvalid},
		{name: "orgs enable not a uuid", args: []string{"orgs", "enable", "a/b"}, want: exitInvalid},
		{name: "executors clear not a target", args: []string{"executors", "clear", "bogus"}, want: exitInvalid},
		{name: "gc bad --limit", args: []string{"gc", "--limit", "0"}, want: exitInvalid},
		{name: "status bad --data", args: []string{"status", "--data", "pm.sweep={"}, want: exitInvalid},
		{name: "serve port out of range", args: []string{"serve", "--addr", "127.0.0.1:99999"}, want: exitInvalid},
		{name: "serve bad kube clusters", args: []string{"serve"}, env: map[string]string{"STALESWEEP_KUBE_CLUSTERS": `{"clusters": {"eu": {}}}`}, want: exitInvalid},
		{name: "indexes outside the repository", args: []string{"indexes", "--root", os.TempDir()}, want: exitInvalid},
		{name: "bench bad --rows", args: []string{"bench", "--rows", "-1"}, want: exitInvalid},
		{name: "demo bad --limit", args: []string{"demo", "--limit", "0"}, want: exitInvalid},
		{name: "fake-cloudrun missing --executions file", args: []string{"fake-cloudrun", "--executions", "/nonexistent/executions.json"}, want: exitInvalid},
		{name: "fake-cloudrun off loopback", args: []string{"fake-cloudrun", "--addr", "10.0.0.1:9090"}, want: exitInvalid},
		// Offline commands that succeed.
		{name: "version", args: []string{"version"}, want: exitOK},
		{name: "help", args: []string{"help", "run"}, want: exitOK},
		{name: "completion", args: []string{"completion", "bash"}, want: exitOK},
		{name: "indexes --check", args: []string{"indexes", "--check", "--root", "../.."}, want: exitOK},
		{name: "alerts --check", args: []string{"alerts", "--check", "--root", "../.."}, want: exitOK},

		// Against the emulator, in order: each answer Firestore can give.
		{name: "run completes", args: append(syncCR, data(enabled)), emu: true, want: exitOK},
		{name: "run dry run", args: append(syncCR, data(enabled), "--dry-run"), emu: true, want: exitOK},
		{name: "run on an opted-out organization", args: append(syncCR, data(optedOut)), emu: true, want: exitInvalid},
		{name: "run on an opted-out organization, included", args: append(syncCR, data(optedOut), "--include-disabled"), emu: true, want: exitOK},
		{name: "run while another holds the scope", args: append(syncCR, data(held)), emu: true, want: exitConflict},
		{name: "pm sweep", args: []string{"pm", "sweep", "--queue", "exit-codes", "--ttl", "300", "--dry-run"}, emu: true, want: exitOK},
		{name: "pause", args: []string{"pause", "pm.sweep", "--scope", "exit-codes", "--reason", "test"}, emu: true, want: exitOK},
		{name: "pm sweep while paused", args: []string{"pm", "sweep", "--queue", "exit-codes", "--ttl", "300"}, emu: true, want: exitPaused},
		{name: "pauses list", args: []string{"pauses", "list"}, emu: true, want: exitOK},
		{name: "resume", args: []string{"resume", "pm.sweep", "--scope", "exit-codes"}, emu: true, want: exitOK},
		{name: "explain a row", args: []string{"explain", "runner_executions/row-1", "--no-executor"}, emu: true, want: exitOK},
		{name: "explain a missing row", args: []string{"explain", "runner_executions/no-such-row"}, emu: true, want: exitNotFound},
		{name: "explain a missing task", args: []string{"explain", "tasks/default/no-such-task"}, emu: true, want: exitNotFound},
		{name: "runs list", args: []string{"runs", "list"}, emu: true, want: exitOK},
		{name: "runs show", args: []string{"runs", "show", holder.WorkflowRunUUID}, emu: true, want: exitOK},
		{name: "runs show a missing run", args: []string{"runs", "show", uuid.NewString()}, emu: true, want: exitNotFound},
		{name: "runs abandon a live run", args: []string{"runs", "abandon", holder.WorkflowRunUUID, "--reason", "test"}, emu: true, want: exitConflict},
		{name: "runs abandon a dead run", args: []string{"runs", "abandon", dead.WorkflowRunUUID, "--reason", "test"}, emu: true, want: exitOK},
		{name: "runs abandon a run that ended", args: []string{"runs", "abandon", dead.WorkflowRunUUID, "--reason", "test"}, emu: true, want: exitOK},
		{name: "runs abandon a missing run", args: []string{"runs", "abandon", uuid.NewString(), "--reason", "test"}, emu: true, want: exitNotFound},
		{name: "executors list", args: []string{"executors", "list"}, emu: true, want: exitOK},
		{name: "executors clear an unknown target", args: []string{"executors", "clear", "kubernetes:nowhere"}, emu: true, want: exitInvalid},
		{name: "executors clear --force", args: []string{"executors", "clear", "kubernetes:nowhere", "--force"}, emu: true, want: exitOK},
		{name: "orgs enable", args: []string{"orgs", "enable", orgToggle}, emu: true, want: exitOK},
		{name: "orgs disable", args: []string{"orgs", "disable", orgToggle}, emu: true, want: exitOK},
		{name: "orgs list", args: []string{"orgs", "list"}, emu: true, want: exitOK},
		{name: "status", args: []string{"status"}, emu: true, want: exitOK},
		{name: "gc", args: []string{"gc", "--dry-run"}, emu: true, want: exitOK},
		{name: "no project", args: []string{"runs", "list"}, emu: true, env: map[string]string{"GOOGLE_CLOUD_PROJECT": "", "FIRESTORE_EMULATOR_HOST": ""}, want: exitInvalid},
	}
	for _, args := range firestoreCommands {
		cases = append(cases, exitCase{name: "firestore unreachable", args: args, env: map[string]string{"STALESWEEP_FIRESTORE_TIMEOUT": "1s"}, want: exitFailed})
		for _, s := range badSettings {
			cases = append(cases, exitCase{name: s.name, args: args, env: map[string]string{s.variable: s.value}, want: exitInvalid})
		}
	}

	emu := map[string]string{"FIRESTORE_EMULATOR_HOST": os.Getenv(firestoreconn.EmulatorEnv), "GOOGLE_CLOUD_PROJECT": project,
		"STALESWEEP_CLOUD_RUN_ENDPOINT": fake.Addr}
	refused := map[string]string{"FIRESTORE_EMULATOR_HOST": "127.0.0.1:1", "GOOGLE_CLOUD_PROJECT": project}
	envOf := func(c exitCase) map[string]string {
		env := map[string]string{}
		for k, v := range map[bool]map[string]string{true: emu, false: refused}[c.emu] {
			env[k] = v
		}
		for k, v := range c.env {
			if env[k] = v; v == "" {
				delete(env, k)
			}
		}
		return env
	}
	check := func(c exitCase, r result) {
		t.Helper()
		what := strings.Join(append([]string{"stalesweep"}, c.args...), " ")
		switch {
		case r.err != nil:
			t.Errorf("%s: %s: %v", c.name, what, r.err)
		case r.code != c.want:
			t.Errorf("%s: %s: exit %d, want %d\nstdout: %s\nstderr: %s", c.name, what, r.code, c.want, r.stdout, r.stderr)
		}
		for _, s := range badSettings {
			if c.want == exitInvalid && c.env[s.variable] == s.value && strings.Count(r.stderr, s.variable) != 1 {
				t.Errorf("%s: %s: stderr names %s %d times, want once: %s", c.name, what, s.variable, strings.Count(r.stderr, s.variable), r.stderr)
			}
		}
	}
	// The cases that need no emulator state run at once; the others in order.
	var offline []exitCase
	for _, c := range cases {
		if !c.emu {
			offline = append(offline, c)
		}
	}
	for i, r := range atOnce(len(offline), func(i int) result { return bin.run(envOf(offline[i]), offline[i].args...) }) {
		check(offline[i], r)
	}
	for _, c := range cases {
		if c.emu {
			check(c, bin.run(envOf(c), c.args...))
		}
	}

	// docs/operations.md's table lists exactly the codes the cases hold the command to.
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "Exit codes, the same for every command:")
	table, _, _ = strings.Cut(table, "\n\n`go run`")
	var documented, tested []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		documented = append(documented, n)
	}
	for _, c := range cases {
		if !slices.Contains(tested, c.want) {
			tested = append(tested, c.want)
		}
	}
	slices.Sort(tested)
	if !slices.Equal(documented, tested) {
		t.Errorf("docs/operations.md's exit codes are %v; TestExitCodes holds the command to %v", documented, tested)
	}
}
