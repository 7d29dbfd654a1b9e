package main

import (
	"strings"
	"testing"
)

// A single-valued flag given twice is refused, exit 2, naming the flag and both values, whatever
// the command and before anything is read or written; a repeatable flag still repeats.
func TestARepeatedSingleValuedFlagIsRefused(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "never-reached")
	for _, args := range [][]string{
		{"pause", "pm.sweep", "--reason", "x", "--scope", "a", "--scope", "b"},
		{"pause", "pm.sweep", "--reason", "x", "--reason=y"},
		{"pm", "sweep", "--queue", "a", "--queue", "b"},
		{"run", "pm.sweep", "--data", "{}", "--data", "{}"},
		{"run", "pm.sweep", "--dry-run", "--dry-run"},
		{"explain", "tasks/a", "-o", "json", "-o", "table"},
		{"executors", "clear", "kubernetes:c", "--project", "p", "--project", "q"},
		{"runs", "list", "--limit", "5", "--limit", "6"},
	} {
		code, _, stderr := invoke(t, args...)
		flag := args[len(args)-2]
		if strings.HasPrefix(args[len(args)-1], "--") {
			flag, _, _ = strings.Cut(args[len(args)-1], "=")
		}
		if flag == "-o" {
			flag = "--output"
		}
		if code != exitInvalid || !strings.Contains(stderr, flag+" given twice") {
			t.Errorf("stalesweep %s: exit %d, stderr %q; want %d naming %s given twice", strings.Join(args, " "), code, stderr, exitInvalid, flag)
		}
	}
	// --collection is repeatable: the second value is taken (and here refused as no collection).
	code, _, stderr := invoke(t, "gc", "--collection", "sweep_runs", "--collection", "nope")
	if code != exitInvalid || strings.Contains(stderr, "given twice") || !strings.Contains(stderr, "nope") {
		t.Errorf("gc --collection twice: exit %d, stderr %q; want the second value judged, not refused as repeated", code, stderr)
	}
}
