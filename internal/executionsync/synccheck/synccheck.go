// Package synccheck holds the checks the execution-sync fault tests of both executors (Cloud
// Run in internal/executionsync, Kubernetes in internal/kubejobs) make of a row and of a run
// record, and the fault they inject on the Firestore connection. It is imported by tests only.
package synccheck

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
)

// SlowErrorWrites delays by d every Firestore commit that records an executor error on a row
// (it writes sync.last_error): latency on the bookkeeping write of a failed call.
func SlowErrorWrites(d time.Duration) grpc.DialOption {
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

// Errored checks that got is want but for what a failed executor call records: the error (code
// first) at the run's time, and one more sync attempt per failed call.
func Errored(t testing.TB, want, got ledger.Execution, attempts int64, code string, at time.Time) {
	t.Helper()
	if d := Diff(want, got, "Sync.LastError", "Sync.LastErrorAt", "Sync.Attempts"); len(d) > 0 {
		t.Errorf("row %s changed by a failed call: %v", want.UUID, d)
	}
	if !strings.HasPrefix(got.Sync.LastError, code+": ") || !got.Sync.LastErrorAt.Equal(at) || got.Sync.Attempts != attempts {
		t.Errorf("row %s recorded error %q at %v after %d attempts, want %s at %v after %d",
			want.UUID, got.Sync.LastError, got.Sync.LastErrorAt, got.Sync.Attempts, code, at, attempts)
	}
}

// Unknown checks that got is want but for what an unknown verdict records.
func Unknown(t testing.TB, want, got ledger.Execution, since, at time.Time, attempts int64) {
	t.Helper()
	if d := Diff(want, got, "Sync.LastSyncedAt", "Sync.LastVerdict", "Sync.UnknownSince", "Sync.Attempts"); len(d) > 0 {
		t.Errorf("unknown row %s changed beyond its sync state: %v", want.UUID, d)
	}
	if s := got.Sync; !s.UnknownSince.Equal(since) || !s.LastSyncedAt.Equal(at) || s.LastVerdict != string(executor.VerdictUnknown) || s.Attempts != attempts {
		t.Errorf("unknown row %s sync = %+v, want unknown since %v, synced at %v, %d attempts", want.UUID, s, since, at, attempts)
	}
}

// Lost checks that got is want settled lost by run at now, unknown since since.
func Lost(t testing.TB, want, got ledger.Execution, since, now time.Time, run string, grace time.Duration) {
	t.Helper()
	if d := Diff(want, got, "Active", "Status", "Outcome", "CompletedAt", "FailureReason", "Settlement",
		"Sync.LastSyncedAt", "Sync.LastVerdict", "Sync.UnknownSince", "Sync.Attempts"); len(d) > 0 {
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

// FailedRecord checks the run record of a run stopped by an executor refusal.
func FailedRecord(t testing.TB, runs *ledger.RunStore, out workflow.Outcome, reason string, code codes.Code, at time.Time) {
	t.Helper()
	rec, err := runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed || !rec.FailedAt.Equal(at) || !rec.CompletedAt.IsZero() {
		t.Errorf("run record status %s failed_at %v completed_at %v, want failed at %v", rec.Status, rec.FailedAt, rec.CompletedAt, at)
	}
	want := ledger.Failure{Reason: reason, Type: workflow.FailurePermanent, Step: "sync", Layer: "executor",
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

// Diff names the fields in which got differs from want, leaving out the paths in skip
// ("Sync.Attempts").
func Diff(want, got ledger.Execution, skip ...string) []string {
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

// RowsOf lists the rows of errs.
func RowsOf(errs []executionsync.RowError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.RunnerExecutionUUID)
	}
	return out
}

// SameSet reports whether a and b hold the same strings, in any order.
func SameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
