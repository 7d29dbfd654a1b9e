package functions

import (
	"context"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// loadFleet is the load test's organizations: each with sweeps enabled, a few stale rows whose
// executions Cloud Run reports ended, and one stale-looking row whose execution still runs.
type loadFleet struct {
	orgs  []string
	stale map[string]string // row → the outcome its execution ended with
	live  map[string]bool   // rows whose execution is running
}

// seedLoadFleet seeds orgs organizations with stalePerOrg ended rows and one live row each,
// every row last observed an hour ago.
func seedLoadFleet(ctx context.Context, fs *firestore.Client, orgs, stalePerOrg int) (loadFleet, error) {
	f := loadFleet{stale: map[string]string{}, live: map[string]bool{}}
	bw := fs.BulkWriter(ctx)
	var jobs []*firestore.BulkWriterJob
	observed := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	ended := time.Now().Add(-2 * time.Hour)
	for range orgs {
		org := uuid.NewString()
		f.orgs = append(f.orgs, org)
		j, err := bw.Set(fs.Collection(ledger.OrganizationsCollection).Doc(org), map[string]any{"sweeps_enabled": true})
		if err != nil {
			return f, err
		}
		jobs = append(jobs, j)
		for i := range stalePerOrg + 1 {
			id := uuid.NewString()
			name := cloudrunfake.ExecutionName("p", "l", "job", id)
			exec := cloudrunfake.Running(name, ended)
			switch {
			case i == stalePerOrg:
				f.live[id] = true
			case i%3 == 2:
				exec, f.stale[id] = cloudrunfake.Failed(name, ended, 0), ledger.OutcomeFailed
			default:
				exec, f.stale[id] = cloudrunfake.Succeeded(name, ended), ledger.OutcomeSucceeded
			}
			if err := fake.SetExecution(exec); err != nil {
				return f, err
			}
			j, err := bw.Set(fs.Collection(ledger.ExecutionsCollection).Doc(id), map[string]any{
				"organization_uuid": org, "provider": ledger.ProviderCloudRun, "status": "running", "active": true,
				"observed_at": observed, "provider_ref": map[string]any{"execution": name},
			})
			if err != nil {
				return f, err
			}
			jobs = append(jobs, j)
		}
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return f, err
		}
	}
	return f, nil
}

// rows lists every row of the fleet.
func (f loadFleet) rows() []string {
	var ids []string
	for id := range f.stale {
		ids = append(ids, id)
	}
	for id := range f.live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// loadState is what the load left: the fleet's rows, every run record and receipt, the
// functions' writes to them, and which run each (tick, organization) names.
type loadState struct {
	rows     map[string]ledger.Execution
	runs     map[string]runstore.RunRecord
	receipts map[string]map[string]ledger.SyncReceipt // run → row → receipt
	writes   docWrites
	expected map[string]string // run uuid a tick names for an organization → that organization
}

// gatherLoad reads the state after the ticks (by message id) have been handled.
func gatherLoad(ctx context.Context, fs *firestore.Client, f loadFleet, mark spyMark, ticks []string) (loadState, error) {
	s := loadState{rows: map[string]ledger.Execution{}, runs: map[string]runstore.RunRecord{},
		receipts: map[string]map[string]ledger.SyncReceipt{}, expected: map[string]string{}}
	var refs []*firestore.DocumentRef
	prefixes := []string{ledger.RunsCollection}
	for _, id := range f.rows() {
		refs = append(refs, fs.Collection(ledger.ExecutionsCollection).Doc(id))
		prefixes = append(prefixes, ledger.ExecutionsCollection+"/"+id)
	}
	snaps, err := fs.GetAll(ctx, refs)
	if err != nil {
		return s, err
	}
	if err := decodeEach(snaps, func(snap *firestore.DocumentSnapshot, e ledger.Execution) { s.rows[snap.Ref.ID] = e }); err != nil {
		return s, err
	}
	runs, err := fs.Collection(ledger.RunsCollection).Documents(ctx).GetAll()
	if err != nil {
		return s, err
	}
	if err := decodeEach(runs, func(snap *firestore.DocumentSnapshot, r runstore.RunRecord) { s.runs[snap.Ref.ID] = r }); err != nil {
		return s, err
	}
	receipts, err := fs.CollectionGroup(ledger.SyncsCollection).Documents(ctx).GetAll()
	if err != nil {
		return s, err
	}
	if err := decodeEach(receipts, func(snap *firestore.DocumentSnapshot, r ledger.SyncReceipt) {
		run := snap.Ref.Parent.Parent.ID
		if s.receipts[run] == nil {
			s.receipts[run] = map[string]ledger.SyncReceipt{}
		}
		s.receipts[run][snap.Ref.ID] = r
	}); err != nil {
		return s, err
	}
	for _, tick := range ticks {
		for _, org := range f.orgs {
			s.expected[pipeline.RunUUID(tick, contract.ExecutionSyncCloudRun, org)] = org
		}
	}
	s.writes = writesUnder(mark, prefixes...)
	return s, nil
}

// decodeEach decodes every snapshot into a T and hands it to put, stopping at the first that
// does not decode.
func decodeEach[T any](snaps []*firestore.DocumentSnapshot, put func(*firestore.DocumentSnapshot, T)) error {
	for _, snap := range snaps {
		var v T
		if err := snap.DataTo(&v); err != nil {
			return err
		}
		put(snap, v)
	}
	return nil
}

// loadCounts is what checkLoad counted.
type loadCounts struct {
	settled, pending          int // stale rows settled; stale rows still active with a reason
	completed, failed, unseen int // runs recorded completed or failed; runs named but never recorded
	lastErrors                int // rows whose last sync recorded an executor error
}

// checkLoad holds the state to the load's invariants and returns what breaks them.
func checkLoad(f loadFleet, s loadState) (loadCounts, []string) {
	var c loadCounts
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	settleReceipts := map[string][]string{} // row → runs holding a settle receipt for it
	for run, rows := range s.receipts {
		for row, r := range rows {
			if n := s.writes.all[ledger.RunsCollection+"/"+run+"/"+ledger.SyncsCollection+"/"+row]; n != 1 {
				bad("receipt of run %s for row %s written %d times, want once", run, row, n)
			}
			if r.Change == string(ledger.ChangeSettle) {
				settleReceipts[row] = append(settleReceipts[row], run)
			}
		}
	}
	for id, want := range f.stale {
		r, path := s.rows[id], ledger.ExecutionsCollection+"/"+id
		if r.Sync.LastError != "" {
			c.lastErrors++
		}
		if n := s.writes.touching(path, "settlement"); n > 1 {
			bad("row %s: settlement written %d times (double settlement)", id, n)
		}
		switch {
		case !r.Active && r.Settlement != nil:
			c.settled++
			if r.Outcome != want || r.Status != want {
				bad("row %s settled %s/%s, but its execution ended %s", id, r.Status, r.Outcome, want)
			}
			if runs := settleReceipts[id]; len(runs) != 1 || runs[0] != r.Settlement.WorkflowRunUUID {
				bad("row %s settled by run %s, but settle receipts are held by %v", id, r.Settlement.WorkflowRunUUID, runs)
			}
		case r.Active && (r.Sync.LastError != "" || !r.Sync.UnknownSince.IsZero()):
			c.pending++
		default:
			bad("row %s lost: active=%t settlement=%v and no recorded reason (sync.last_error, sync.unknown_since)", id, r.Active, r.Settlement != nil)
		}
	}
	for id := range f.live {
		r, path := s.rows[id], ledger.ExecutionsCollection+"/"+id
		if r.Sync.LastError != "" {
			c.lastErrors++
		}
		if n := s.writes.touching(path, "settlement"); n > 0 || !r.Active || r.Status != ledger.StatusRunning || r.Settlement != nil || len(settleReceipts[id]) > 0 {
			bad("live row %s was settled: active=%t status=%s settlement writes=%d settle receipts=%v", id, r.Active, r.Status, n, settleReceipts[id])
		}
	}
	for uuid, r := range s.runs {
		org, ok := s.expected[uuid]
		switch {
		case !ok:
			bad("run %s was named by no tick of the load", uuid)
			continue
		case r.InitialData["organization_uuid"] != org:
			bad("run %s ran on organization %v, but its uuid names %s", uuid, r.InitialData["organization_uuid"], org)
		}
		switch r.Status {
		case "completed":
			c.completed++
		case "failed":
			c.failed++
		default:
			bad("run %s is %q, not terminal", uuid, r.Status)
		}
		if n := s.writes.all[ledger.RunsCollection+"/"+uuid]; n != 2 {
			bad("run %s's record was written %d times, want 2 (created, ended)", uuid, n)
		}
		candidates, started, failedStart, skipped := r.Output["candidate_count"], r.Output["started_count"], r.Output["failed_start_count"], r.Output["skipped_missing_metadata_count"]
		published, _ := r.Stats["published"].(int64)
		st, _ := started.(int64)
		if sum := asInt(started) + asInt(failedStart) + asInt(skipped); sum != asInt(candidates) {
			bad("run %s: %v candidates, but started + failed to start + skipped = %d", uuid, candidates, sum)
		}
		if st != published || int64(len(s.receipts[uuid])) > st {
			bad("run %s started %d syncs and published %d, but holds %d receipts", uuid, st, published, len(s.receipts[uuid]))
		}
		// A started sync without a receipt was never decided: its every delivery failed, and
		// the last was acknowledged (an error not worth retrying). Its row must say so, or have
		// been settled by another run since.
		startedRows, _ := r.Output["started_runner_execution_uuids"].([]any)
		if int64(len(startedRows)) != st {
			bad("run %s started %d syncs but lists %d rows", uuid, st, len(startedRows))
		}
		for _, v := range startedRows {
			row, _ := v.(string)
			if _, decided := s.receipts[uuid][row]; decided {
				continue
			}
			if e := s.rows[row]; e.Sync.LastError == "" && (e.Settlement == nil || e.Settlement.WorkflowRunUUID == uuid) {
				bad("run %s started a sync of row %s that was never decided, and the row records no error", uuid, row)
			}
		}
	}
	for run := range s.receipts {
		if _, ok := s.runs[run]; !ok {
			bad("receipts of run %s, which has no record", run)
		}
	}
	for uuid := range s.expected {
		if _, ok := s.runs[uuid]; !ok {
			c.unseen++
		}
	}
	sort.Strings(problems)
	return c, problems
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
