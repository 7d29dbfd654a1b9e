package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// fleet seeds organizations, each with three stale rows Cloud Run reports succeeded, two
// failed and one still running; the first `enabled` have sweeps enabled.
type fleet struct {
	orgs     []string
	enabled  map[string]bool
	terminal map[string][]string // by organization
	alive    map[string][]string
}

func seedFleet(t *testing.T, w world, n, enabled int) fleet {
	t.Helper()
	f := fleet{enabled: map[string]bool{}, terminal: map[string][]string{}, alive: map[string][]string{}}
	orgs := ledgertest.Organizations{Client: w.fs}
	for i := range n {
		org := uuid.NewString()
		f.orgs = append(f.orgs, org)
		f.enabled[org] = i < enabled
		if err := orgs.Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: i < enabled}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []rowKind{kindSucceeded, kindSucceeded, kindSucceeded, kindFailed, kindFailed} {
			f.terminal[org] = append(f.terminal[org], w.stale(t, org, k))
		}
		f.alive[org] = append(f.alive[org], w.stale(t, org, kindRunning))
	}
	return f
}

// settled reports whether every stale row of every enabled organization reached its end and
// every run's receipts are in.
func (f fleet) settled(t *testing.T, w world, runs map[string]string) bool {
	runStore := runstore.New(w.fs)
	for org, run := range runs {
		rec, err := runStore.GetRun(context.Background(), run)
		if err != nil || rec.Status != "completed" {
			return false
		}
		if _, counts, err := runStore.SyncReceipts(context.Background(), run, 100); err != nil || sum(counts) != 6 {
			return false
		}
		for _, id := range f.terminal[org] {
			if w.row(t, id).Active {
				return false
			}
		}
	}
	return true
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (f fleet) check(t *testing.T, w world) {
	t.Helper()
	for _, org := range f.orgs {
		for _, id := range append(append([]string{}, f.terminal[org]...), f.alive[org]...) {
			r := w.row(t, id)
			switch {
			case !f.enabled[org]:
				if !r.Active || r.Sync.Attempts != 0 {
					t.Errorf("disabled organization %s: row %s was touched: %+v", org, id, r.Sync)
				}
			case r.Sync.Attempts != 1:
				t.Errorf("row %s written %d times, want exactly once", id, r.Sync.Attempts)
			}
		}
		if !f.enabled[org] {
			continue
		}
		for _, id := range f.terminal[org] {
			if r := w.row(t, id); r.Active || r.Settlement == nil || (r.Outcome != "succeeded" && r.Outcome != "failed") {
				t.Errorf("row %s not settled: %+v", id, r)
			}
		}
		for _, id := range f.alive[org] {
			if r := w.row(t, id); !r.Active || r.Sync.LastVerdict != "running" {
				t.Errorf("live row %s: %+v", id, r)
			}
		}
	}
}

func publishTick(t *testing.T, data string) string {
	t.Helper()
	ctx := context.Background()
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	pub := ps.Publisher(pipeline.TicksDefault)
	defer pub.Stop()
	id, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(data), Attributes: map[string]string{message.AttrTrigger: "schedule"}}).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const tickData = `{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"limit": 50}}`

func TestATickSettlesEveryEnabledOrganizationThroughThePipeline(t *testing.T) {
	w := newFleetWorld(t)
	f := seedFleet(t, w, 20, 15)
	began := time.Now()
	tickID := publishTick(t, tickData)
	runs := map[string]string{}
	for _, org := range f.orgs {
		if f.enabled[org] {
			runs[org] = pipeline.RunUUID(tickID, contract.ExecutionSyncCloudRun, org)
		}
	}
	eventually(t, 90*time.Second, "every enabled organization's rows to settle", func() bool { return f.settled(t, w, runs) })
	t.Logf("tick → 20 organizations (15 enabled) × 6 stale rows: 75 settled, 15 refreshed, in %s", time.Since(began).Round(time.Millisecond))
	f.check(t, w)

	recs := w.runRecords(t)
	if len(recs) != len(runs) {
		t.Errorf("%d run records, want one per enabled organization (%d)", len(recs), len(runs))
	}
	for _, rec := range recs {
		org, _ := rec.InitialData["organization_uuid"].(string)
		if runs[org] != rec.WorkflowRunUUID || rec.Trigger != "schedule" || rec.Output["started_count"] != int64(6) || rec.Stats["published"] != int64(6) {
			t.Errorf("run record %s: org %s trigger %s output %v stats %v", rec.WorkflowRunUUID, org, rec.Trigger, rec.Output, rec.Stats)
		}
	}
}

// One organization's ten thousand stale rows that can never be settled (no provider reference),
// older than any other's, take nothing from another organization: its rows settle in the same
// tick (the rule is within two), and the first gets a run of its own that reports what it
// skipped, having read no more than its scan's cap.
func TestUnsettleableRowsOfOneOrganizationStarveNoOther(t *testing.T) {
	w := newFleetWorld(t)
	ctx := context.Background()
	hog := uuid.NewString()
	w.organization(t, hog, true)
	older := time.Now().Add(-2 * time.Hour).Truncate(time.Microsecond)
	bw := w.fs.BulkWriter(ctx)
	for range 10000 {
		if _, err := bw.Set(w.fs.Collection(ledger.ExecutionsCollection).NewDoc(), map[string]any{
			"organization_uuid": hog, "provider": ledger.ProviderCloudRun, "status": "running", "active": true, "observed_at": older,
		}); err != nil {
			t.Fatal(err)
		}
	}
	bw.End()
	f := seedFleet(t, w, 1, 1)

	tickID := publishTick(t, tickData)
	runs := map[string]string{f.orgs[0]: pipeline.RunUUID(tickID, contract.ExecutionSyncCloudRun, f.orgs[0])}
	eventually(t, 90*time.Second, "the other organization's rows to settle in the first tick", func() bool { return f.settled(t, w, runs) })
	f.check(t, w)

	hogRun := pipeline.RunUUID(tickID, contract.ExecutionSyncCloudRun, hog)
	var rec runstore.RunRecord
	eventually(t, 30*time.Second, "the hog's own run to end", func() bool {
		var err error
		rec, err = runstore.New(w.fs).GetRun(ctx, hogRun)
		return err == nil && rec.Status == "completed"
	})
	// It reads at most ScanFactor × limit documents, all of them without a provider reference.
	want := int64(executionsync.ScanFactorDefault * 50)
	if rec.Output["skipped_missing_metadata_count"] != want || rec.Output["started_count"] != int64(0) || rec.Stats["scan_capped"] != true {
		t.Errorf("the hog's run output %v stats %v, want %d skipped, nothing started, the scan capped", rec.Output, rec.Stats, want)
	}
}

func TestDuplicateTicksAndSyncMessagesChangeNothingTwice(t *testing.T) {
	w := newFleetWorld(t)
	f := seedFleet(t, w, 4, 4)
	tickID := "duplicated-tick-" + uuid.NewString()
	body := pushBody([]byte(tickData), map[string]string{message.AttrTrigger: "schedule"}, tickID)
	for range 2 { // the same message delivered twice, as a push subscription may
		if code, out := post(t, "/Dispatch", http.Header{"Content-Type": {"application/json"}}, body); code != http.StatusOK {
			t.Fatalf("dispatch: %d %v", code, out)
		}
	}
	runs := map[string]string{}
	for _, org := range f.orgs {
		runs[org] = pipeline.RunUUID(tickID, contract.ExecutionSyncCloudRun, org)
	}
	eventually(t, 60*time.Second, "the duplicated tick's rows to settle", func() bool { return f.settled(t, w, runs) })
	f.check(t, w)
	if recs := w.runRecords(t); len(recs) != 4 {
		t.Errorf("%d run records after a tick delivered twice, want 4", len(recs))
	}

	// One sync message delivered five times, at once.
	id := w.stale(t, f.orgs[0], kindFailed)
	row := w.row(t, id)
	req := message.Sync{
		WorkflowRunUUID: "run-" + uuid.NewString(), OrganizationUUID: f.orgs[0], RunnerExecutionUUID: id,
		Provider: "cloud_run", ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt,
	}
	w.sweepRun(t, req.WorkflowRunUUID, f.orgs[0], id)
	data, _ := json.Marshal(req)
	msg := pushBody(data, nil, "sync-"+id)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out := post(t, "/SyncExecution", ceHeaders("sync-"+id), []byte(cloudEventData(msg))); code != http.StatusOK {
				t.Errorf("sync delivery: %d %v", code, out)
			}
		}()
	}
	wg.Wait()
	r := w.row(t, id)
	if r.Active || r.Outcome != "failed" || r.Sync.Attempts != 1 || r.Settlement.WorkflowRunUUID != req.WorkflowRunUUID {
		t.Errorf("row after five deliveries: active=%t outcome=%s attempts=%d", r.Active, r.Outcome, r.Sync.Attempts)
	}
	receipts, counts, err := runstore.New(w.fs).SyncReceipts(context.Background(), req.WorkflowRunUUID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(receipts) != 1 || counts["settle:failed"] != 1 {
		t.Errorf("receipts = %+v", receipts)
	}
}

// cloudEventData is the body of a binary-mode CloudEvent carrying a push body's message.
func cloudEventData(push []byte) string {
	var p map[string]any
	_ = json.Unmarshal(push, &p)
	b, _ := json.Marshal(map[string]any{"message": p["message"], "subscription": p["subscription"]})
	return string(b)
}

func TestMalformedMessagesAreAcknowledgedAndChangeNothing(t *testing.T) {
	w := newWorld(t)
	org := uuid.NewString()
	if err := (ledgertest.Organizations{Client: w.fs}).Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
		t.Fatal(err)
	}
	id := w.stale(t, org, kindSucceeded)
	row := w.row(t, id)
	goodSync := message.Sync{WorkflowRunUUID: "r", OrganizationUUID: org, RunnerExecutionUUID: id, Provider: "cloud_run",
		ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt}
	syncWith := func(mod func(m map[string]any)) string {
		b, _ := json.Marshal(goodSync)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mod(m)
		b, _ = json.Marshal(m)
		return string(b)
	}
	cases := map[string][]string{
		"Dispatch": {``, `not json`, `[]`, `{"workflow_type": "runner.nope"}`, `{"workflow_type": 7}`,
			`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"limit": 0}}`,
			`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": "x"}`,
			`{"workflow_type": "pm.sweep"}`},
		"Sweep": {``, `{{`, `{"workflow_type": "runner.execution-sync-stale-cloud-run"}`,
			fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q, "limit": 500}}`, org),
			fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q}, "x": 1}`, org)},
		"SyncExecution": {``, `{}`, `[1]`,
			syncWith(func(m map[string]any) { delete(m, "workflow_run_uuid") }),
			syncWith(func(m map[string]any) { m["organization_uuid"] = "acme" }),
			syncWith(func(m map[string]any) { m["provider"] = "nomad" }),
			syncWith(func(m map[string]any) { m["observed_at"] = "yesterday" }),
			syncWith(func(m map[string]any) { m["runner_execution_uuid"] = "../../x" }),
			syncWith(func(m map[string]any) { m["extra"] = true }),
			syncWith(func(m map[string]any) { delete(m, "provider_ref") })},
	}
	for target, bodies := range cases {
		for i, data := range bodies {
			// As the emulator pushes it, and as Eventarc sends it.
			if code, out := post(t, "/"+target, http.Header{"Content-Type": {"application/json"}}, pushBody([]byte(data), nil, fmt.Sprint("m", i))); code != http.StatusOK {
				t.Errorf("%s push %d (%q): status %d %v, want 200", target, i, data, code, out)
			}
			if code, out := post(t, "/"+target, ceHeaders(fmt.Sprint("ce", i)), []byte(cloudEventData(pushBody([]byte(data), nil, fmt.Sprint("ce", i))))); code != http.StatusOK {
				t.Errorf("%s event %d (%q): status %d %v, want 200", target, i, data, code, out)
			}
		}
		// A CloudEvent without a Pub/Sub message at all.
		if code, _ := post(t, "/"+target, ceHeaders("no-message"), []byte(`{"subscription": "s"}`)); code != http.StatusOK {
			t.Errorf("%s: an event without a message: status %d, want 200", target, code)
		}
	}
	if recs := w.runRecords(t); len(recs) != 0 {
		t.Errorf("malformed messages left %d run records", len(recs))
	}
	if r := w.row(t, id); !r.Active || r.Sync.Attempts != 0 {
		t.Errorf("a malformed message changed a row: %+v", r)
	}
	if _, counts, _ := runstore.New(w.fs).SyncReceipts(context.Background(), "r", 10); sum(counts) != 0 {
		t.Errorf("a malformed sync message left receipts: %v", counts)
	}
}
