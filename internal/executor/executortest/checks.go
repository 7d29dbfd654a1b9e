package executortest

// The checks the suite makes of a row and of a run record after each kind of fault, and the
// fault it injects on the Firestore connection. (They were internal/executionsync/synccheck.)

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// slowErrorWrites delays by d every Firestore commit that records an executor error on a row
// (it writes sync.last_error): latency on the bookkeeping write of a failed call.
func slowErrorWrites(d time.Duration) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if c, ok := req.(*firestorepb.CommitRequest); ok && slices.ContainsFunc(c.GetWrites(), func(w *firestorepb.Write) bool {
			return slices.Contains(w.GetUpdateMask().GetFieldPaths(), "sync.last_error")
		}) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// errored checks that got is want but for what a failed executor call records: the error (code
// first) at the run's time, and one more sync attempt per failed call.
func errored(t testing.TB, want, got ledger.Execution, attempts int64, code string, at time.Time) {
	t.Helper()
	if d := diff(want, got, "Sync.LastError", "Sync.LastErrorAt", "Sync.Attempts"); len(d) > 0 {
		t.Errorf("row %s changed by a failed call: %v", want.UUID, d)
	}
	if !strings.HasPrefix(got.Sync.LastError, code+": ") || !got.Sync.LastErrorAt.Equal(at) || got.Sync.Attempts != attempts {
		t.Errorf("row %s recorded error %q at %v after %d attempts, want %s at %v after %d",
			want.UUID, got.Sync.LastError, got.Sync.LastErrorAt, got.Sync.Attempts, code, at, attempts)
	}
}

// unknown checks that got is want but for what an unknown verdict records.
func unknown(t testing.TB, want, got ledger.Execution, since, at time.Time, attempts int64) {
	t.Helper()
	if d := diff(want, got, "Sync.LastSyncedAt", "Sync.LastVerdict", "Sync.UnknownSince", "Sync.Attempts", "Sync.Target"); len(d) > 0 {
		t.Errorf("unknown row %s changed beyond its sync state: %v", want.UUID, d)
	}
	if got.Sync.Target == "" {
		t.Errorf("unknown row %s does not name the executor target that answered", want.UUID)
	}
	if s := got.Sync; !s.UnknownSince.Equal(since) || !s.LastSyncedAt.Equal(at) || s.LastVerdict != string(executor.VerdictUnknown) || s.Attempts != attempts {
		t.Errorf("unknown row %s sync = %+v, want unknown since %v, synced at %v, %d attempts", want.UUID, s, since, at, attempts)
	}
}

// lost checks that got is want settled lost by run at now, unknown since since.
func lost(t testing.TB, want, got ledger.Execution, since, now time.Time, run string, grace time.Duration) {
	t.Helper()
	if d := diff(want, got, "Active", "Status", "Outcome", "CompletedAt", "FailureReason", "Settlement",
		"Sync.LastSyncedAt", "Sync.LastVerdict", "Sync.UnknownSince", "Sync.Attempts", "Sync.Target"); len(d) > 0 {
		t.Errorf("lost row %s changed beyond its settlement: %v", want.UUID, d)
	}
	if got.Active || got.Status != ledger.StatusFailed || got.Outcome != ledger.OutcomeLost || !got.CompletedAt.Equal(now) ||
		!strings.Contains(got.FailureReason, grace.String()) || !got.Sync.UnknownSince.IsZero() {
		t.Errorf("lost row %s: active=%t status=%s outcome=%s completed_at=%v failure_reason=%q sync=%+v",
			want.UUID, got.Active, got.Status, got.Outcome, got.CompletedAt, got.FailureReason, got.Sync)
	}
	st := got.Settlement
	if st == nil || st.Reason != executionsync.ReasonLost || st.WorkflowRunUUID != run || !st.At.Equal(now) {
		t.Fatalf("lost row %s settlement = %+v", want.UUID, st)
	}
	if at, _ := st.Evidence["unknown_since"].(time.Time); !at.Equal(since) {
		t.Errorf("lost evidence unknown_since = %v, want %v", st.Evidence["unknown_since"], since)
	}
	if at, _ := st.Evidence["row_observed_at"].(time.Time); !at.Equal(want.ObservedAt) {
		t.Errorf("lost evidence row_observed_at = %v, want %v", st.Evidence["row_observed_at"], want.ObservedAt)
	}
}

// failedRecord checks the run record of a run stopped by an executor refusal.
func failedRecord(t testing.TB, runs *runstore.Store, out workflow.Outcome, reason string, code codes.Code, at time.Time) {
	t.Helper()
	rec, err := runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed || !rec.FailedAt.Equal(at) || !rec.CompletedAt.IsZero() {
		t.Errorf("run record status %s failed_at %v completed_at %v, want failed at %v", rec.Status, rec.FailedAt, rec.CompletedAt, at)
	}
	want := runstore.Failure{Reason: reason, Type: workflow.FailurePermanent, Step: "sync", Layer: "executor",
		AtState: "reconciling", Action: "complete", ErrorType: code.String()}
	if rec.Failure == nil {
		t.Fatal("run record has no failure")
	}
	got := *rec.Failure
	if !strings.Contains(got.Error, code.String()) {
		t.Errorf("run record error %q does not carry %s", got.Error, code)
	}
	got.Error = ""
	if got != want {
		t.Errorf("run record failure = %+v, want %+v", got, want)
	}
	if rec.Stats["stopped_by"] != strings.TrimPrefix(reason, "executor_") {
		t.Errorf("run record stats stopped_by = %v", rec.Stats["stopped_by"])
	}
}

// diff names the fields in which got differs from want, leaving out the paths in skip
// ("Sync.Attempts").
func diff(want, got ledger.Execution, skip ...string) []string {
	var diffs []string
	var walk func(path string, w, g reflect.Value)
	walk = func(path string, w, g reflect.Value) {
		if slices.Contains(skip, path) {
			return
		}
		if tw, ok := w.Interface().(time.Time); ok {
			if tg := g.Interface().(time.Time); !tw.Equal(tg) {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", path, tg, tw))
			}
			return
		}
		if w.Kind() == reflect.Struct {
			for i := range w.NumField() {
				if f := w.Type().Field(i); f.IsExported() {
					walk(strings.TrimPrefix(path+"."+f.Name, "."), w.Field(i), g.Field(i))
				}
			}
			return
		}
		if !reflect.DeepEqual(w.Interface(), g.Interface()) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", path, g.Interface(), w.Interface()))
		}
	}
	walk("", reflect.ValueOf(want), reflect.ValueOf(got))
	return diffs
}

// rowsOf lists the rows of errs.
func rowsOf(errs []executionsync.RowError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.RunnerExecutionUUID)
	}
	return out
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// transientRuns checks the runs of a transient-fault test: the executor fails some calls with
// one of Codes, every row's execution succeeded, and runs go on until every row is settled. It
// keeps what the runs have done so far.
type transientRuns struct {
	Rows   int
	Codes  []codes.Code
	Seeded map[string]ledger.Execution // the rows as seeded
	Get    func(id string) ledger.Execution

	FailedCalls map[string]int64  // failed calls recorded on each row so far
	ByCode      map[string]int    // errored syncs by code
	Settled     map[string]string // row → the run that settled it
}

// newTransientRuns follows the seeded rows, read back through get, across the runs of a test
// whose faults map to cs.
func newTransientRuns(cs []codes.Code, seeded map[string]ledger.Execution, get func(id string) ledger.Execution) *transientRuns {
	return &transientRuns{Rows: len(seeded), Codes: cs, Seeded: seeded, Get: get,
		FailedCalls: map[string]int64{}, ByCode: map[string]int{}, Settled: map[string]string{}}
}

// Done reports whether every row is settled.
func (r *transientRuns) Done() bool { return len(r.Settled) == r.Rows }

// Check checks the run numbered run, which ended as out with output o and stats s at now:
// every unsettled row was a candidate, nothing was deferred; a row whose call failed with one of
// Codes changed only by the error it records; a row whose sync started was settled succeeded by
// this run, with one attempt more than its failed calls.
func (r *transientRuns) Check(t testing.TB, run int, out workflow.Outcome, o executionsync.Output, s executionsync.Stats, now time.Time) {
	t.Helper()
	// A run whose every call failed reached the executor for no row: it says so by failing
	// (executor_unreachable); any other run completes.
	unreachable := o.StartedCount == 0 && s.Errored > 0
	switch {
	case unreachable && (out.Status != workflow.StateFailed || out.Output["failure_reason"] != executionsync.ReasonExecutorUnreachable):
		t.Fatalf("run %d: every call failed, ended %s (%v), want failed %s", run, out.Status, out.Output["failure_reason"], executionsync.ReasonExecutorUnreachable)
	case !unreachable && out.Status != workflow.StateCompleted:
		t.Fatalf("run %d ended %s: %v", run, out.Status, out.Err)
	}
	if want := r.Rows - len(r.Settled); o.CandidateCount != want || s.Deferred != 0 || s.StoppedBy != "" {
		t.Errorf("run %d: %d candidates (want %d), deferred %d, stopped by %q", run, o.CandidateCount, want, s.Deferred, s.StoppedBy)
	}
	if s.Errored != len(s.Errors) || s.Errored != o.FailedStartCount || !sameSet(rowsOf(s.Errors), o.FailedRunnerExecutionUUIDs) {
		t.Errorf("run %d: errored %d, %d errors listed, failed starts %v", run, s.Errored, len(s.Errors), o.FailedRunnerExecutionUUIDs)
	}
	for _, re := range s.Errors {
		r.ByCode[re.Code]++
		if re.Layer != executionsync.LayerExecutor || !slices.ContainsFunc(r.Codes, func(c codes.Code) bool { return c.String() == re.Code }) {
			t.Errorf("run %d: row %s errored in %s with %s, want the executor with one of %v", run, re.RunnerExecutionUUID, re.Layer, re.Code, r.Codes)
		}
		r.FailedCalls[re.RunnerExecutionUUID]++
		errored(t, r.Seeded[re.RunnerExecutionUUID], r.Get(re.RunnerExecutionUUID), r.FailedCalls[re.RunnerExecutionUUID], re.Code, now)
	}
	if s.Settled["succeeded"] != o.StartedCount || len(s.Settled) > 1 {
		t.Errorf("run %d: settled %v, want every started row succeeded (%d)", run, s.Settled, o.StartedCount)
	}
	for _, id := range o.StartedRunnerExecutionUUIDs {
		row := r.Get(id)
		if row.Active || row.Outcome != ledger.OutcomeSucceeded || row.Settlement == nil || row.Settlement.WorkflowRunUUID != out.RunUUID ||
			row.Sync.Attempts != r.FailedCalls[id]+1 {
			t.Errorf("run %d: started row %s not settled by it: active=%t outcome=%s settlement=%+v attempts=%d (want %d)",
				run, id, row.Active, row.Outcome, row.Settlement, row.Sync.Attempts, r.FailedCalls[id]+1)
		}
		r.Settled[id] = out.RunUUID
	}
	t.Logf("run %d: %d candidates, %d settled, %d errored %v", run, o.CandidateCount, o.StartedCount, s.Errored, r.ByCode)
}

// Faulted fails the test unless some sync errored: a test that injected nothing checks nothing.
func (r *transientRuns) Faulted(t testing.TB) {
	t.Helper()
	if len(r.FailedCalls) == 0 {
		t.Fatal("no sync errored: the test injected nothing")
	}
}

// Finish checks what the runs did in all: rows errored with each code the faults map to
// (DeadlineExceeded, never retried, whenever it is injected; the one code of a one-code test),
// and every row was settled.
func (r *transientRuns) Finish(t testing.TB) {
	t.Helper()
	if slices.Contains(r.Codes, codes.DeadlineExceeded) && r.ByCode[codes.DeadlineExceeded.String()] == 0 {
		t.Errorf("no row errored with DeadlineExceeded: %v", r.ByCode)
	}
	if len(r.Codes) == 1 && r.ByCode[r.Codes[0].String()] == 0 {
		t.Errorf("no row errored with %s: %v", r.Codes[0], r.ByCode)
	}
	if !r.Done() {
		t.Errorf("%d of %d rows settled within five runs", len(r.Settled), r.Rows)
	}
}

// allTimedOut checks a run in which every seeded row's call ran past its timeout: every row
// errored with DeadlineExceeded in the executor, none was settled, and each row changed only by
// that one error, recorded at now.
func allTimedOut(t testing.TB, seeded map[string]ledger.Execution, get func(id string) ledger.Execution, o executionsync.Output, s executionsync.Stats, now time.Time) {
	t.Helper()
	rows := len(seeded)
	if s.Errored != rows || len(s.Settled) != 0 || o.FailedStartCount != rows {
		t.Errorf("stats = %+v output = %+v, want every row errored, none settled", s, o)
	}
	for _, re := range s.Errors {
		if re.Code != codes.DeadlineExceeded.String() || re.Layer != executionsync.LayerExecutor {
			t.Errorf("row %s errored %s in %s, want DeadlineExceeded in the executor", re.RunnerExecutionUUID, re.Code, re.Layer)
		}
	}
	for id, want := range seeded {
		errored(t, want, get(id), 1, codes.DeadlineExceeded.String(), now)
	}
}

// refused checks a run that the executor refused with code on every call (PermissionDenied,
// Unauthenticated): the run failed with reason executor_<reason>, at most concurrency rows
// errored (the calls already in flight), the rest were deferred, nothing was settled or started;
// the record and the output say why; errored rows changed only by their one error and deferred
// rows not at all.
func refused(t testing.TB, runs *runstore.Store, seeded map[string]ledger.Execution, get func(id string) ledger.Execution,
	out workflow.Outcome, o executionsync.Output, s executionsync.Stats, code codes.Code, reason string, concurrency int, now time.Time) {
	t.Helper()
	rows := len(seeded)
	if out.Status != workflow.StateFailed {
		t.Fatalf("run ended %s, want failed", out.Status)
	}
	if s.Errored < 1 || s.Errored > concurrency || s.Deferred != rows-s.Errored || len(s.Settled) != 0 || s.StoppedBy != reason {
		t.Errorf("stats = %+v; want 1..%d errored, the rest deferred, nothing settled, stopped by %s", s, concurrency, reason)
	}
	if o.StartedCount != 0 || o.FailedStartCount != rows {
		t.Errorf("output = %+v, want no row started", o)
	}
	failedRecord(t, runs, out, "executor_"+reason, code, now)
	if out.Output["failure_reason"] != "executor_"+reason || out.Output["failed_layer"] != "executor" {
		t.Errorf("output envelope = %v", out.Output)
	}
	erroredRows := rowsOf(s.Errors)
	for id, want := range seeded {
		got := get(id)
		if slices.Contains(erroredRows, id) {
			errored(t, want, got, 1, code.String(), now)
		} else if d := diff(want, got); len(d) > 0 {
			t.Errorf("deferred row %s changed: %v", id, d)
		}
	}
}

// exhaustedRun checks a run stopped by ResourceExhausted after begun syncs had begun: the one
// throttled row errored and changed only by that error, the begun-1 others settled succeeded,
// and every row not begun deferred, counted and untouched.
func exhaustedRun(t testing.TB, seeded map[string]ledger.Execution, get func(id string) ledger.Execution,
	o executionsync.Output, s executionsync.Stats, begun int, now time.Time) {
	t.Helper()
	rows := len(seeded)
	if s.StoppedBy != "resource_exhausted" || s.Errored != 1 || s.Deferred != rows-begun || s.Settled["succeeded"] != begun-1 || s.OutOfBudget {
		t.Errorf("stats = %+v; want stopped by resource_exhausted, 1 errored, %d deferred, %d settled", s, rows-begun, begun-1)
	}
	if o.StartedCount != begun-1 || o.FailedStartCount != rows-begun+1 {
		t.Errorf("output = %+v", o)
	}
	if len(s.Errors) != 1 || s.Errors[0].Code != codes.ResourceExhausted.String() || s.Errors[0].Layer != executionsync.LayerExecutor {
		t.Fatalf("errors = %+v", s.Errors)
	}
	throttled := s.Errors[0].RunnerExecutionUUID
	for id, want := range seeded {
		got := get(id)
		switch {
		case id == throttled:
			errored(t, want, got, 1, codes.ResourceExhausted.String(), now)
		case slices.Contains(o.FailedRunnerExecutionUUIDs, id): // deferred: never sent to the executor, never written
			if d := diff(want, got); len(d) > 0 {
				t.Errorf("deferred row %s changed: %v", id, d)
			}
		default: // in flight, or begun before the stop: settled from the executor's answer
			if got.Active || got.Outcome != ledger.OutcomeSucceeded {
				t.Errorf("row %s begun before the stop was not settled: active=%t outcome=%s", id, got.Active, got.Outcome)
			}
		}
	}
}
