package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/auth/authtest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Each documented manual call, with the token its command sends, through the HTTP face: the
// allowed principals get their run, with themselves as its actor; a token minted for another
// service, an unverified email and a principal not on the list are refused with the right code.
// The allow-list (testAuth) is what Terraform writes: ops@example.com, robot@… and robot's
// unique id.
func TestEachDocumentedManualCallIsAcceptedAndEveryOtherTokenRefused(t *testing.T) {
	w := newWorld(t)
	tests := []struct {
		name   string
		token  string
		status int
		actor  string // of the run record, when accepted
	}{
		{"gcloud functions call --gen2, a user", issuer.GcloudUser(allowed, "1001"), 200, allowed},
		{"gcloud functions call --gen2 --impersonate-service-account", issuer.GcloudImpersonated(robotID), 200, "subject:" + robotID},
		{"curl, gcloud auth print-identity-token, a user", issuer.GcloudUser(allowed, "1001"), 200, allowed},
		{"curl, print-identity-token --impersonate-service-account --audiences=URL --include-email",
			issuer.ServiceAccount(robot, robotID, audience, true), 200, robot},
		{"a workload, the metadata server, format=full", issuer.Metadata(robot, robotID, audience, "full"), 200, robot},
		{"a workload, the metadata server, format=standard", issuer.Metadata(robot, robotID, audience, "standard"), 200, "subject:" + robotID},
		{"a token minted for another service", issuer.ServiceAccount(robot, robotID, "https://other-123456789.europe-west1.run.app", true), 401, ""},
		{"an unverified email", issuer.Mint(authtest.Claims{"iss": authtest.Google, "aud": audience, "sub": "1001", "email": allowed, "email_verified": false}), 403, ""},
		{"a user not on the list", issuer.GcloudUser("intruder@example.com", "1002"), 403, ""},
		{"a service account without its email, not on the list", issuer.ServiceAccount("x@p.iam.gserviceaccount.com", "7", audience, false), 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(w.runRecords(t))
			header := http.Header{"Authorization": {authtest.Bearer(tt.token)}, "Content-Type": {"application/json"}}
			code, out := post(t, "/StartWorkflow", header, []byte(startBody(w.org, "")))
			if code != tt.status {
				t.Fatalf("status %d %v, want %d", code, out, tt.status)
			}
			recs := w.runRecords(t)
			switch {
			case tt.status != 200 && len(recs) != before:
				t.Errorf("a refused call left a run record")
			case tt.status == 200 && !hasRunBy(recs, tt.actor):
				t.Errorf("no run record with actor %q: %+v", tt.actor, recs)
			}
		})
	}
}

func hasRunBy(recs []runstore.RunRecord, actor string) bool {
	for _, r := range recs {
		if r.Actor == actor && r.Trigger == string(workflow.TriggerManual) {
			return true
		}
	}
	return false
}

// A sync message writes a row only when the row is of the organization and the executor the
// message names, the organization has not opted out, and the run it names exists, swept that
// organization, and is still publishing its syncs or started this one. Otherwise it is
// acknowledged and writes nothing at all: not the row, not a receipt.
func TestASyncMessageWritesOnlyARowItsRunMayWrite(t *testing.T) {
	w := newWorld(t)
	a, b := w.org, uuid.NewString()
	w.organization(t, b, true)
	ctx := context.Background()
	runs := runstore.New(w.fs)
	otherWorkflow := "k8s-" + uuid.NewString()
	now := time.Now().UTC()
	if err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: otherWorkflow, WorkflowType: string(contract.ExecutionSyncKubernetes),
		Status: workflow.StateReconciling, InitialData: map[string]any{"organization_uuid": b}, InitiatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	runOfA, runOfB, finishedOfB := "a-"+uuid.NewString(), "b-"+uuid.NewString(), "done-"+uuid.NewString()
	w.sweepRun(t, runOfA, a)
	w.sweepRun(t, runOfB, b)
	w.sweepRun(t, finishedOfB, b, "some-other-row")

	tests := []struct {
		name    string
		claim   func(row string) message.Sync // the message, for b's row
		refused string                        // "" settles
	}{
		{"organization A and a made-up run, for B's row", func(row string) message.Sync {
			return message.Sync{WorkflowRunUUID: "made-up-" + row, OrganizationUUID: a}
		}, executionsync.RefuseOtherOrganization},
		// From here on, each message breaks exactly one rule.
		{"organization A and A's own run, for B's row", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: runOfA, OrganizationUUID: a}
		}, executionsync.RefuseOtherOrganization},
		{"B's organization and a made-up run", func(row string) message.Sync {
			return message.Sync{WorkflowRunUUID: "made-up-" + row, OrganizationUUID: b}
		}, executionsync.RefuseRunMissing},
		{"a run of A", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: runOfA, OrganizationUUID: b}
		}, executionsync.RefuseRunOtherScope},
		{"a run of another workflow", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: otherWorkflow, OrganizationUUID: b}
		}, executionsync.RefuseRunOtherWorkflow},
		{"a finished run that did not start it", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: finishedOfB, OrganizationUUID: b}
		}, executionsync.RefuseRunDidNotStart},
		{"another executor, with a run of its workflow", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: otherWorkflow, OrganizationUUID: b, Provider: ledger.ProviderKubernetes}
		}, executionsync.RefuseOtherProvider},
		{"B's run, still publishing", func(string) message.Sync {
			return message.Sync{WorkflowRunUUID: runOfB, OrganizationUUID: b}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := w.stale(t, b, kindSucceeded)
			row := w.row(t, id)
			req := tt.claim(id)
			req.RunnerExecutionUUID, req.ProviderRef, req.ObservedAt = id, row.ProviderRef, row.ObservedAt
			if req.Provider == "" {
				req.Provider = row.Provider
			}
			mark := markSpy()
			deliverSync(t, req)
			writes := writesUnder(mark, ledger.ExecutionsCollection+"/"+id, ledger.RunsCollection+"/"+req.WorkflowRunUUID)
			after := w.row(t, id)
			if tt.refused != "" {
				if len(writes.all) != 0 || !after.Active || after.Sync.Attempts != 0 {
					t.Errorf("refused (%s) yet wrote %v; row active=%t attempts=%d", tt.refused, writes.all, after.Active, after.Sync.Attempts)
				}
				return
			}
			receipt := ledger.RunsCollection + "/" + req.WorkflowRunUUID + "/" + ledger.SyncsCollection + "/" + id
			if after.Active || after.Outcome != ledger.OutcomeSucceeded || writes.all[receipt] != 1 {
				t.Errorf("B's own run: row active=%t outcome=%q, writes %v", after.Active, after.Outcome, writes.all)
			}
		})
	}
}

func deliverSync(t *testing.T, req message.Sync) {
	t.Helper()
	data, _ := json.Marshal(req)
	id := "sync-" + uuid.NewString()
	if code, out := post(t, "/SyncExecution", ceHeaders(id), []byte(cloudEventData(pushBody(data, nil, id)))); code != http.StatusOK {
		t.Fatalf("sync delivery: %d %v, want 200 (acknowledged)", code, out)
	}
}

// An organization that opted out is skipped on every scheduled and Pub/Sub path whatever the
// message names, and refused on the HTTP face: a tick naming it publishes nothing, a sweep
// message naming it starts no run, a sync message for its row (of a run that did start it)
// writes nothing, and StartWorkflow answers 403. Its rows stay as they were.
func TestAnOrganizationThatOptedOutIsNeverSweptWhateverAMessageNames(t *testing.T) {
	w := newWorld(t)
	org := uuid.NewString()
	w.organization(t, org, false)
	id := w.stale(t, org, kindSucceeded)
	row := w.row(t, id)
	run := "run-" + uuid.NewString()
	w.sweepRun(t, run, org, id) // a run that started its sync before the organization opted out
	mark := markSpy()

	tick := fmt.Sprintf(`{"workflow_type": %q, "initial_data": {"organization_uuid": %q}}`, contract.ExecutionSyncCloudRun, org)
	if code, out := post(t, "/Dispatch", ceHeaders("tick-"+id), []byte(cloudEventData(pushBody([]byte(tick), map[string]string{message.AttrTrigger: "manual"}, "tick-"+id)))); code != http.StatusOK {
		t.Errorf("tick: %d %v", code, out)
	}
	sweepRun := "sweep-" + uuid.NewString()
	if code, out := post(t, "/Sweep", ceHeaders(sweepRun), []byte(cloudEventData(pushBody([]byte(tick),
		map[string]string{message.AttrTrigger: "schedule", message.AttrWorkflowRunUUID: sweepRun}, sweepRun)))); code != http.StatusOK {
		t.Errorf("sweep: %d %v", code, out)
	}
	deliverSync(t, message.Sync{WorkflowRunUUID: run, OrganizationUUID: org, RunnerExecutionUUID: id,
		Provider: row.Provider, ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt})
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(startBody(org, "")))
	if ecode, _, _ := errorOf(out); code != http.StatusForbidden || ecode != "forbidden" {
		t.Errorf("StartWorkflow: %d %v, want 403", code, out)
	}

	if r := w.row(t, id); !r.Active || r.Sync.Attempts != 0 {
		t.Errorf("the row of an organization that opted out was written: active=%t attempts=%d", r.Active, r.Sync.Attempts)
	}
	if writes := writesUnder(mark, ledger.ExecutionsCollection+"/"+id, ledger.RunsCollection+"/"+sweepRun, ledger.RunsCollection+"/"+run); len(writes.all) != 0 {
		t.Errorf("writes: %v", writes.all)
	}
	for _, r := range w.runRecords(t) {
		if r.InitialData["organization_uuid"] == org && r.WorkflowRunUUID != run {
			t.Errorf("a run %s (%s) was started for the organization", r.WorkflowRunUUID, r.Trigger)
		}
	}
}

// The run record's actor is what was verified; a publisher's claim is kept apart.
func TestAPublishersActorIsAClaimNotTheActor(t *testing.T) {
	w := newWorld(t)
	run := "sweep-" + uuid.NewString()
	data := fmt.Sprintf(`{"workflow_type": %q, "initial_data": {"organization_uuid": %q}}`, contract.ExecutionSyncCloudRun, w.org)
	attrs := map[string]string{message.AttrTrigger: "manual", message.AttrWorkflowRunUUID: run, message.AttrActor: "cloud-scheduler"}
	if code, out := post(t, "/Sweep", ceHeaders(run), []byte(cloudEventData(pushBody([]byte(data), attrs, run)))); code != http.StatusOK {
		t.Fatalf("sweep: %d %v", code, out)
	}
	rec, err := runstore.New(w.fs).GetRun(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Actor != "pubsub:"+pipeline.SweepsDefault || rec.ClaimedActor != "cloud-scheduler" {
		t.Errorf("actor %q, claimed_actor %q; want the subscription's topic and the claim apart", rec.Actor, rec.ClaimedActor)
	}
}

// pm.sweep's ttl has a floor off the command line, as older_than_ms has: StartWorkflow refuses
// a smaller one naming the field, and a tick below it publishes nothing.
func TestPMSweepsTTLHasAFloorOffTheCommandLine(t *testing.T) {
	w := newWorld(t)
	queue := "q-" + uuid.NewString()
	worker := ledgertest.Tasks{Client: w.fs, Now: func() time.Time { return time.Now().Add(-time.Minute) }}
	ctx := context.Background()
	if err := worker.Enqueue(ctx, queue, "t1", "s", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Next(ctx, queue, "alive", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"workflow_type": "pm.sweep", "initial_data": {"queue": %q, "ttl": 1}}`, queue)
	code, out := post(t, "/StartWorkflow", bearer(t), []byte(body))
	_, _, details := errorOf(out)
	vs, _ := details["violations"].([]any)
	if code != http.StatusBadRequest || len(vs) == 0 || vs[0].(map[string]any)["field"] != "ttl" {
		t.Errorf("ttl 1 over HTTP: %d %v, want 400 naming ttl", code, out)
	}
	tick := fmt.Sprintf(`{"workflow_type": "pm.sweep", "initial_data": {"queue": %q, "ttl": 1}}`, queue)
	mark := markSpy()
	if code, _ := post(t, "/Dispatch", ceHeaders("tick-"+queue), []byte(cloudEventData(pushBody([]byte(tick), nil, "tick-"+queue)))); code != http.StatusOK {
		t.Errorf("tick: %d", code)
	}
	if got, err := ledgertest.Value(ledger.NewTaskStore(w.fs, ledger.TxConfig{}).Row(ctx, queue, "t1")); err != nil || got.Status != ledger.TaskWorking {
		t.Errorf("task = %+v, %v: still working", got, err)
	}
	if writes := writesUnder(mark, ledger.TaskQueuesCollection+"/"+queue); len(writes.all) != 0 {
		t.Errorf("writes: %v", writes.all)
	}
}
