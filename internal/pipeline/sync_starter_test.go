package pipeline_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestPublishFailuresAreFailedStartsAndTheRowsComeBackNextRun(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	ps := newPubSub(t, pipeline.SyncsDefault)
	fake, client := cloudruntest.Start(t)

	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	org := uuid.NewString()
	rows := map[string]time.Time{}
	for i := range 8 {
		id := uuid.NewString()
		observed := now.Add(-time.Duration(10+i) * time.Minute)
		rows[id] = observed
		err := writer.Put(context.Background(), ledger.Execution{
			UUID: id, OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true,
			ObservedAt: observed, ProviderRef: map[string]any{"execution": cloudrunfake.ExecutionName("p", "l", "j", id[:8])},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun}.WithDefaults()
	wf, err := executionsync.New(store, cloudrun.New(client, cloudrun.Config{}),
		&pipeline.SyncStarter{Publisher: ps.pub, Topic: pipeline.SyncsDefault}, cfg, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := executionsync.Input{OrganizationUUID: org, Limit: 25, MinAgeSeconds: 60}

	ps.fail.on.Store(true)
	out, stats, err := wf.RunOnce(context.Background(), workflow.Run{UUID: "run-1", Logger: logging.Discard()}, in)
	if err != nil {
		t.Fatalf("publish failures failed the run: %v", err)
	}
	if out.CandidateCount != 8 || out.FailedStartCount != 8 || out.StartedCount != 0 || stats.Errored != 8 || stats.StoppedBy != "" {
		t.Errorf("with publishing refused: output %+v stats %+v", out, stats)
	}
	if len(stats.Errors) == 0 || stats.Errors[0].Layer != executionsync.LayerPubSub {
		t.Errorf("errors = %+v, want the pubsub layer named", stats.Errors)
	}
	for id := range rows {
		if r, _ := store.Get(context.Background(), id); !r.Active || r.Sync.Attempts != 0 {
			t.Errorf("row %s changed although its sync was never published", id)
		}
	}
	if got := fake.Calls(cloudrunfake.GetExecution); got != 0 {
		t.Errorf("the publishing run called Cloud Run %d times", got)
	}

	ps.fail.on.Store(false)
	out, stats, err = wf.RunOnce(context.Background(), workflow.Run{UUID: "run-2", Logger: logging.Discard()}, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.StartedCount != 8 || out.FailedStartCount != 0 || stats.Published != 8 {
		t.Errorf("next run: output %+v stats %+v", out, stats)
	}
	msgs := ps.srv.Messages()
	if len(msgs) != 8 {
		t.Fatalf("%d messages on the syncs topic, want 8", len(msgs))
	}
	for _, m := range msgs {
		var req message.Sync
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Fatal(err)
		}
		if err := req.Validate(); err != nil {
			t.Errorf("published sync request is invalid: %v", err)
		}
		if !req.ObservedAt.Equal(rows[req.RunnerExecutionUUID]) || req.WorkflowRunUUID != "run-2" || req.OrganizationUUID != org ||
			m.Attributes[message.AttrRunnerExecutionUUID] != req.RunnerExecutionUUID {
			t.Errorf("sync request %+v (attributes %v) does not carry the row as scanned", req, m.Attributes)
		}
	}
}
