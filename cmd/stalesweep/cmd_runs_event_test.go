package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// runs show of the id an event settlement carries, which has no run record, prints the
// completion entry and the row it settled; an id of that form no row carries is not found, and
// one of neither form is refused before Firestore is opened.
func TestRunsShowAnEventSettlement(t *testing.T) {
	fs := commandFirestore(t)
	ctx := context.Background()
	fake, client := cloudruntest.Start(t)
	org, id := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org)
	name := cloudrunfake.ExecutionName("p", "europe-west1", "job", id)
	if err := fake.SetExecution(cloudrunfake.Succeeded(name, time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := (ledgertest.Executions{Client: fs}).Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: ledger.ProviderCloudRun,
		ProviderRef: map[string]any{cloudrun.RefKey: name}, Status: ledger.StatusRunning, Active: true, ObservedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	sig := cloudrun.Signal
	sig.Provider = ledger.ProviderCloudRun
	obs := executionsync.NewObserver(executionsync.ObserverConfig{Rows: store, Signals: []logentry.Signal{sig},
		Syncers: map[string]*executionsync.Syncer{ledger.ProviderCloudRun: executionsync.NewSyncer(executionsync.SyncerConfig{
			Store: store, Executor: cloudrun.New(client, cloudrun.Config{}), Kind: executionsync.CloudRun})}})
	if o, err := obs.Observe(ctx, logentrytest.CloudRunEnd(name, "entry-7", "", time.Now()), time.Now(), nil); err != nil || len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncSettled {
		t.Fatalf("observe: %+v %v", o, err)
	}
	row, err := store.Get(ctx, id)
	if err != nil || row.Settlement == nil {
		t.Fatalf("row %+v %v", row, err)
	}
	runID := row.Settlement.WorkflowRunUUID

	code, stdout, stderr := invoke(t, "runs", "show", runID, "-o", "json")
	var shown eventView
	if err := json.Unmarshal([]byte(stdout), &shown); code != exitOK || err != nil {
		t.Fatalf("runs show %s: exit %d %v\n%s%s", runID, code, err, stdout, stderr)
	}
	if shown.Path != "event" || shown.EventInsertID != "entry-7" || !strings.HasSuffix(shown.EventLog, "system_event") ||
		len(shown.Rows) != 1 || shown.Rows[0].RunnerExecutionUUID != id || shown.Rows[0].Outcome != ledger.OutcomeSucceeded ||
		shown.Rows[0].Reason != executionsync.ReasonExecutorTerminal || !shown.Rows[0].SettledAt.Equal(row.Settlement.At) {
		t.Errorf("runs show -o json: %+v", shown)
	}
	if code, stdout, _ := invoke(t, "runs", "show", runID); code != exitOK || !strings.Contains(stdout, "runner_executions/"+id+"  succeeded") || !strings.Contains(stdout, "entry-7") {
		t.Errorf("runs show: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := invoke(t, "runs", "show", "event-"+strings.Repeat("0", 32)); code != exitNotFound || !strings.Contains(stderr, "no row carries event settlement") {
		t.Errorf("an event id no row carries: exit %d %s", code, stderr)
	}
	for _, bad := range []string{"event-xyz", "event-" + strings.Repeat("A", 32), "event-" + strings.Repeat("0", 31)} {
		if code, _, stderr := invoke(t, "runs", "show", bad); code != exitInvalid || !strings.Contains(stderr, "nor an event settlement's id") {
			t.Errorf("runs show %s: exit %d %s", bad, code, stderr)
		}
	}
}
