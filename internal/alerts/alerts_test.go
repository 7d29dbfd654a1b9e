package alerts

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The committed terraform/alerts.tf.json is what the list generates (go test ./... fails when
// it is stale).
func TestTerraformFileIsCurrent(t *testing.T) {
	want, err := TerraformJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../" + TerraformFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what alerts.Metrics generates; run: go run ./cmd/stalesweep alerts", TerraformFile)
	}
}

// docs/operations.md holds the table of every metric, with its event.
func TestTheOperationsGuideListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../" + DocFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, MarkdownTable()) {
		t.Errorf("%s does not hold the current metrics table; run: go run ./cmd/stalesweep alerts", DocFile)
	}
	for _, m := range Metrics {
		if !bytes.Contains(doc, []byte("| `"+m.Name+"` | `"+string(m.Event)+"`")) {
			t.Errorf("%s does not list metric %s", DocFile, m.Name)
		}
	}
}

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

// The Terraform file has a metric per listed one, extracting each label from its field, a
// policy per alerting one notifying the module's channels, and one dashboard charting each.
func TestTheTerraformFileDeclaresEveryMetric(t *testing.T) {
	b, err := TerraformJSON()
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Resource struct {
			Metrics   map[string]map[string]any `json:"google_logging_metric"`
			Policies  map[string]map[string]any `json:"google_monitoring_alert_policy"`
			Dashboard map[string]struct {
				JSON string `json:"dashboard_json"`
			} `json:"google_monitoring_dashboard"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	r := file.Resource
	var dash map[string]any
	if len(r.Dashboard) != 1 || json.Unmarshal([]byte(r.Dashboard["stalesweep"].JSON), &dash) != nil {
		t.Fatalf("dashboards: %v", r.Dashboard)
	}
	alerting := 0
	for _, m := range Metrics {
		got := r.Metrics[m.Name]
		if got == nil || !strings.HasPrefix(got["filter"].(string), "${local."+resourceFilterLocal+"} AND "+m.Filter()) {
			t.Errorf("metric %s: %v", m.Name, got)
			continue
		}
		ex := got["label_extractors"].(map[string]any)
		for _, l := range m.Labels {
			if ex[l.Key] != "EXTRACT(jsonPayload."+l.Field+")" {
				t.Errorf("metric %s: label %s is extracted by %v", m.Name, l.Key, ex[l.Key])
			}
		}
		if len(ex) != len(m.Labels) {
			t.Errorf("metric %s extracts %v", m.Name, ex)
		}
		if !strings.Contains(r.Dashboard["stalesweep"].JSON, `"title":"`+m.Chart+`"`) {
			t.Errorf("the dashboard does not chart %s", m.Name)
		}
		p := r.Policies[m.Name]
		if (p != nil) != (m.Alert != nil) {
			t.Errorf("metric %s: policy %v, alert %v", m.Name, p, m.Alert)
		}
		if p != nil {
			alerting++
			if p["notification_channels"] != "${var.alert_notification_channels}" {
				t.Errorf("policy %s notifies %v", m.Name, p["notification_channels"])
			}
		}
	}
	if len(r.Metrics) != len(Metrics) || len(r.Policies) != alerting {
		t.Errorf("%d metrics and %d policies declared, want %d and %d", len(r.Metrics), len(r.Policies), len(Metrics), alerting)
	}
}
