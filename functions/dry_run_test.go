package functions

import (
	"net/http"
	"testing"
)

// "dry_run": true beside initial_data previews the run: the answer is the output a run would
// give, marked dry_run, with the stats and their preview; nothing is written, not even a run
// record; and the real run that follows does what the preview said.
func TestStartWorkflowDryRunPreviewsAndWritesNothing(t *testing.T) {
	w := newWorld(t)
	done := w.stale(t, w.org, kindSucceeded)
	live := w.stale(t, w.org, kindRunning)
	mark := markSpy()
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "dry_run": true, "initial_data": {"organization_uuid": "`+w.org+`"}}`))
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	stats, _ := out["stats"].(map[string]any)
	preview, _ := stats["preview"].(map[string]any)
	settle, _ := preview["would_settle"].(map[string]any)
	rows, _ := preview["rows"].([]any)
	if out["dry_run"] != true || out["started_count"] != float64(2) || out["organization_uuid"] != w.org ||
		settle["succeeded"] != float64(1) || preview["would_refresh"] != float64(1) || len(rows) != 2 {
		t.Errorf("dry run answer = %v", out)
	}
	if d := writesUnder(mark, "runner_executions/"+done, "runner_executions/"+live); len(d.all) != 0 {
		t.Errorf("the dry run wrote rows: %v", d.all)
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("the dry run left %d run records", len(recs))
	}
	if r := w.row(t, done); !r.Active {
		t.Errorf("the dry run settled a row: %+v", r)
	}

	code, out = post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
	if code != http.StatusOK || out["dry_run"] != nil || out["stats"] != nil {
		t.Fatalf("real run: status %d: %v", code, out)
	}
	if r := w.row(t, done); r.Active || r.Outcome != "succeeded" {
		t.Errorf("the real run did not settle what the preview said it would: %+v", r)
	}
	if r := w.row(t, live); !r.Active || r.Sync.LastVerdict != "running" {
		t.Errorf("the real run did not refresh what the preview said it would: %+v", r)
	}
}

// dry_run belongs beside initial_data: inside it the seed's schema refuses it, and it must be a
// boolean.
func TestStartWorkflowDryRunIsValidated(t *testing.T) {
	w := newWorld(t)
	for _, tt := range []struct{ name, body, field string }{
		{"inside initial_data", startBody(w.org, `, "dry_run": true`), "dry_run"},
		{"not a boolean", `{"workflow_type": "runner.execution-sync-stale-cloud-run", "dry_run": "yes", "initial_data": {"organization_uuid": "` + w.org + `"}}`, "dry_run"},
	} {
		code, body := post(t, "/StartWorkflow", bearer(t), []byte(tt.body))
		ecode, msg, details := errorOf(body)
		vs, _ := details["violations"].([]any)
		var field any
		if len(vs) > 0 {
			field = vs[0].(map[string]any)["field"]
		}
		if code != http.StatusBadRequest || ecode != "validation_failed" || field != tt.field {
			t.Errorf("%s: %d %s %q, violations %v; want 400 validation_failed naming %s", tt.name, code, ecode, msg, vs, tt.field)
		}
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("refused requests left %d run records", len(recs))
	}
}
