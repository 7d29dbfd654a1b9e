package functions

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func (w world) pause(t *testing.T, scope string) {
	t.Helper()
	err := pausestore.New(w.fs).Put(context.Background(), pausestore.Pause{WorkflowType: string(contract.ExecutionSyncCloudRun),
		Scope: scope, PausedBy: "local:op@host", PausedAt: time.Now().Add(-time.Minute), Reason: "incident 7"})
	if err != nil {
		t.Fatal(err)
	}
}

func (w world) resume(t *testing.T, scope string) {
	t.Helper()
	if _, err := pausestore.New(w.fs).Delete(context.Background(), string(contract.ExecutionSyncCloudRun), scope); err != nil {
		t.Fatal(err)
	}
}

// runsOf are the run records of org's scope.
func (w world) runsOf(t *testing.T, org string) []runstore.RunRecord {
	t.Helper()
	var out []runstore.RunRecord
	for _, r := range w.runRecords(t) {
		if r.InitialData["organization_uuid"] == org {
			out = append(out, r)
		}
	}
	return out
}

// push delivers m once, as a push subscription would, and returns the answer and its header.
func push(t *testing.T, m pubsubMessage) (int, http.Header) {
	t.Helper()
	code, header, _ := send(t, http.MethodPost, "/"+m.target, http.Header{"Content-Type": {"application/json"}}, pushBody(m.data, m.attrs, m.id))
	return code, header
}

func TestStartWorkflowRefusesAPausedScopeWithConflictUnlessTheCallerOverrides(t *testing.T) {
	w := newWorld(t)
	other := uuid.NewString()
	w.organization(t, other, true)
	id := w.stale(t, w.org, kindSucceeded)
	w.pause(t, w.org)

	code, body := post(t, "/StartWorkflow", bearer(t), []byte(startBody(w.org, "")))
	ecode, msg, details := errorOf(body)
	paused, _ := details["paused"].(map[string]any)
	if code != http.StatusConflict || ecode != "conflict" || paused["reason"] != "incident 7" || paused["scope"] != w.org {
		t.Fatalf("a paused scope: %d %v, want 409 conflict naming the pause", code, body)
	}
	t.Logf("refused: %s", msg)
	if r := w.row(t, id); !r.Active || len(w.runsOf(t, w.org)) != 0 {
		t.Fatalf("the refused run wrote: row active=%t, %d run records", r.Active, len(w.runsOf(t, w.org)))
	}
	if code, body := post(t, "/StartWorkflow", bearer(t), []byte(startBody(other, ""))); code != http.StatusOK {
		t.Errorf("another organization's run: %d %v, want 200", code, body)
	}

	override, _ := json.Marshal(map[string]any{"workflow_type": contract.ExecutionSyncCloudRun,
		"initial_data": map[string]any{"organization_uuid": w.org}, "override_pause": true})
	if code, body := post(t, "/StartWorkflow", bearer(t), override); code != http.StatusOK {
		t.Fatalf("override_pause: %d %v, want 200", code, body)
	}
	recs := w.runsOf(t, w.org)
	if r := w.row(t, id); r.Active || len(recs) != 1 || !recs[0].OverridePause || recs[0].Scope != w.org {
		t.Errorf("override_pause: row active=%t, records %+v; want it settled by one run recorded as overriding", r.Active, recs)
	}
}

// A scheduled sweep of a paused scope is acknowledged (no redelivery storm), writes no run
// record and touches no row; a tick publishes no sweep for it; after resume, both run.
func TestAPausedScopeStopsAPubSubSweepAndATickUntilResumed(t *testing.T) {
	w := newWorld(t)
	id := w.stale(t, w.org, kindSucceeded)
	w.pause(t, w.org)
	initial := executionInitial(w.org)

	tickID := "tick-" + uuid.NewString()
	code, header := push(t, tickMessage(tickID, contract.ExecutionSyncCloudRun, initial))
	if code != http.StatusOK || header.Get(HeaderPublished) != "0" {
		t.Errorf("a tick naming a paused scope: %d, published %q; want acknowledged, 0 published", code, header.Get(HeaderPublished))
	}

	sweep := sweepMessage(tickID, contract.ExecutionSyncCloudRun, initial, w.org)
	for i := range 2 { // a redelivery is acknowledged the same way
		if code, _ := push(t, sweep); code != http.StatusOK {
			t.Fatalf("delivery %d of a paused scope's sweep: %d, want 200 (acknowledged, not retried)", i, code)
		}
	}
	if r := w.row(t, id); !r.Active || len(w.runsOf(t, w.org)) != 0 {
		t.Fatalf("the paused sweep wrote: row active=%t, %d run records", r.Active, len(w.runsOf(t, w.org)))
	}

	w.resume(t, w.org)
	if code, _ := push(t, sweepMessage("tick-"+uuid.NewString(), contract.ExecutionSyncCloudRun, initial, w.org)); code != http.StatusOK {
		t.Fatalf("after resume: %d", code)
	}
	if recs := w.runsOf(t, w.org); len(recs) != 1 || recs[0].Scope != w.org {
		t.Errorf("after resume: run records %+v, want one on %s", recs, w.org)
	}
}
