package alerts

import (
	"encoding/json"
	"strings"
	"testing"
)

// The list is well formed: unique names, a known severity, labels, and an alert that says what
// to do.
func TestTheListIsWellFormed(t *testing.T) {
	names := map[string]bool{}
	for _, m := range Metrics {
		switch {
		case names[m.Name]:
			t.Errorf("metric %s is listed twice", m.Name)
		case severityRank[m.MinSeverity] == 0:
			t.Errorf("metric %s: min severity %q is not a LogSeverity", m.Name, m.MinSeverity)
		case len(m.Labels) == 0 || m.Chart == "" || m.Description == "":
			t.Errorf("metric %s lacks labels, a chart title or a description", m.Name)
		case m.Alert != nil && (m.Alert.Window <= 0 || m.Alert.Runbook == "" || !strings.Contains(m.Alert.Runbook, "stalesweep") && !strings.Contains(m.Alert.Runbook, "docs/")):
			t.Errorf("metric %s: alert %+v lacks a window or a runbook", m.Name, m.Alert)
		}
		names[m.Name] = true
	}
}

// A metric counts the lines of its event at its severity or above whose Where fields hold, and
// reports the fields it extracts that a counted line lacks.
func TestMatches(t *testing.T) {
	var lost Metric
	for _, m := range Metrics {
		if m.Name == "rows_lost" {
			lost = m
		}
	}
	line := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		line    string
		counted bool
		missing int
	}{
		{`{"event": "row_settled", "severity": "INFO", "outcome": "lost", "workflow_type": "w"}`, true, 0},
		{`{"event": "row_settled", "severity": "WARNING", "outcome": "lost", "workflow_type": "w"}`, true, 0},
		{`{"event": "row_settled", "severity": "INFO", "outcome": "lost"}`, true, 1},
		{`{"event": "row_settled", "severity": "INFO", "outcome": "lost", "workflow_type": ""}`, true, 1},
		{`{"event": "row_settled", "severity": "INFO", "outcome": "failed", "workflow_type": "w"}`, false, 0},
		{`{"event": "row_settled", "severity": "INFO", "outcome": "lost", "workflow_type": "w", "dry_run": true}`, false, 0},
		{`{"event": "row_settled", "severity": "DEBUG", "outcome": "lost", "workflow_type": "w"}`, false, 0},
		{`{"event": "run_failed", "severity": "ERROR", "outcome": "lost", "workflow_type": "w"}`, false, 0},
		{`{"message": "runner execution settled", "severity": "INFO", "outcome": "lost", "workflow_type": "w"}`, false, 0},
	} {
		counted, missing := lost.Matches(line(c.line))
		if counted != c.counted || len(missing) != c.missing {
			t.Errorf("%s: counted %t missing %v, want %t and %d missing", c.line, counted, missing, c.counted, c.missing)
		}
	}
	if got := lost.Filter(); got != `jsonPayload.event="row_settled" AND severity>=INFO AND NOT jsonPayload.dry_run=true AND jsonPayload.outcome="lost"` {
		t.Errorf("filter = %s", got)
	}
}
