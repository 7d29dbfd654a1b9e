package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Each malformed document a run meets is counted; the first ten are named in the sample and in
// a WARNING line carrying the path and the decoding error, so a flood of bad rows cannot flood
// the logs.
func TestMalformedDocumentsAreCountedAndTheFirstTenNamedInWarnings(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var m Malformed
	if m.Report() != nil {
		t.Error("a run that met none reports a tally")
	}
	for i := range 12 {
		m.Note(log, fmt.Sprintf("task_queues/q/tasks/t-%02d", i), "cannot set type string to int64")
	}
	if m.Report() != &m || m.Count != 12 || len(m.Sample) != malformedSampleMax || m.Sample[9] != "task_queues/q/tasks/t-09" {
		t.Errorf("tally = %+v, want 12 counted and the first 10 named", m)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != malformedSampleMax {
		t.Fatalf("%d log lines, want %d", len(lines), malformedSampleMax)
	}
	for i, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] != "WARN" || rec["path"] != fmt.Sprintf("task_queues/q/tasks/t-%02d", i) || rec["error"] != "cannot set type string to int64" {
			t.Errorf("line %d = %v", i, rec)
		}
	}
}
