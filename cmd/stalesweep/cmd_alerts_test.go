package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/alerts"
)

// The committed alerts.tf.json and the metrics table of docs/operations.md are what the list
// generates; --check fails on a stale or missing one, naming it, and a write makes both current.
func TestAlertsCheck(t *testing.T) {
	if code, _, stderr := invoke(t, "alerts", "--check", "--root", "../.."); code != exitOK {
		t.Errorf("the committed alerts files are not current: %s", stderr)
	}
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "terraform"), 0o755)
	_ = os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	doc := filepath.Join(dir, "docs", "operations.md")
	_ = os.WriteFile(doc, []byte("# Operations\n"), 0o600)
	if code, _, stderr := invoke(t, "alerts", "--root", dir); code != exitFailed || !strings.Contains(stderr, "alerts:begin") {
		t.Errorf("a document without the table's lines: exit %d, %s", code, stderr)
	}
	committed, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(doc, []byte(strings.Replace(string(committed), "| `rows_lost` |", "| `rows_gone` |", 1)), 0o600)
	code, _, stderr := invoke(t, "alerts", "--check", "--root", dir)
	if code != exitFailed || !strings.Contains(stderr, "operations.md") || !strings.Contains(stderr, "alerts.tf.json") {
		t.Errorf("--check passed a missing Terraform file or an edited table (exit %d): %s", code, stderr)
	}
	if code, stdout, _ := invoke(t, "alerts", "--root", dir); code != exitOK || !strings.Contains(stdout, "alerts.tf.json") {
		t.Fatalf("writing the alerts files failed (exit %d)", code)
	}
	if code, _, stderr := invoke(t, "alerts", "--check", "--root", dir); code != exitOK {
		t.Errorf("freshly written files do not pass --check: %s", stderr)
	}
	if got, _ := os.ReadFile(doc); string(got) != string(committed) {
		t.Error("writing the table changed more of the document than the table")
	}
}

// The committed terraform/alerts.tf.json is what the list generates (go test ./... fails when
// it is stale).
func TestTerraformFileIsCurrent(t *testing.T) {
	want, err := alertsTerraformJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../" + alertsTerraformFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what alerts.Metrics generates; run: go run ./cmd/stalesweep alerts", alertsTerraformFile)
	}
}

// docs/operations.md holds the table of every metric, with its event.
func TestTheOperationsGuideListsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../" + alertsDocFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, alertsMarkdownTable()) {
		t.Errorf("%s does not hold the current metrics table; run: go run ./cmd/stalesweep alerts", alertsDocFile)
	}
	for _, m := range alerts.Metrics {
		if !bytes.Contains(doc, []byte("| `"+m.Name+"` | `"+string(m.Event)+"`")) {
			t.Errorf("%s does not list metric %s", alertsDocFile, m.Name)
		}
	}
}

// The Terraform file has a metric per listed one, extracting each label from its field, a
// policy per alerting one notifying the module's channels, and one dashboard charting each.
func TestTheTerraformFileDeclaresEveryMetric(t *testing.T) {
	b, err := alertsTerraformJSON()
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
	for _, m := range alerts.Metrics {
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
	if len(r.Metrics) != len(alerts.Metrics) || len(r.Policies) != alerting {
		t.Errorf("%d metrics and %d policies declared, want %d and %d", len(r.Metrics), len(r.Policies), len(alerts.Metrics), alerting)
	}
}
