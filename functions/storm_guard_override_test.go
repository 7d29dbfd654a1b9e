package functions

import (
	"net/http"
	"strings"
	"testing"
)

// "override_storm_guard": true beside initial_data is forbidden (403), as docs/operations.md
// says: the answer names the command that can override, and nothing runs.
func TestStartWorkflowForbidsAStormGuardOverride(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t, w.org, kindSucceeded)
	body := `{"workflow_type": "pm.sweep", "override_storm_guard": true, "initial_data": {"queue": "builds"}}`
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(body))
	ecode, msg, _ := errorOf(out)
	if code != http.StatusForbidden || ecode != "forbidden" || !strings.Contains(msg, "--override-storm-guard") {
		t.Errorf("override_storm_guard over HTTP: %d %s %q; want 403 forbidden naming --override-storm-guard", code, ecode, msg)
	}
	code, out = post(t, "/StartWorkflow", bearer(t), []byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "override_storm_guard": true, "initial_data": {"organization_uuid": "`+w.org+`"}}`))
	if ecode, _, _ := errorOf(out); code != http.StatusForbidden || ecode != "forbidden" {
		t.Errorf("override_storm_guard on an execution sync: %d %v; want 403 forbidden", code, out)
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("forbidden requests left %d run records", len(recs))
	}
	if r := w.row(t, id); !r.Active {
		t.Errorf("a forbidden request settled a row: %+v", r)
	}
}
