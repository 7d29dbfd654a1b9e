// Package breakertest is the end-to-end check of the store breaker (workflow.NoteRow) that each
// row-settling workflow's tests run: Firestore goes away under a run's row transactions, and the
// run must stop within a few rows and fail store_unavailable, its record ended failed.
//
// Test tooling only: no product package imports it.
package breakertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Rows counts a run's row transactions and takes the store down under them: the first Healthy go
// through, and the outage starts as the next one begins. A test's store wrapper calls Begin as
// each row's transaction begins, and runs that transaction on a client dialled through Outage
// (Outage.Client); the run's scan and reads go through a healthy client.
type Rows struct {
	Outage  *fsfaulttest.Outage
	Healthy int
	n       atomic.Int64
}

// Begin notes that one row's transaction begins.
func (r *Rows) Begin() {
	if r.n.Add(1) > int64(r.Healthy) {
		r.Outage.Down()
	}
}

// Attempted is how many row transactions began.
func (r *Rows) Attempted() int { return int(r.n.Load()) }

// Run is one run under the outage.
type Run struct {
	Engine *workflow.Engine
	Req    workflow.Request
	// Records is a client without the outage, to read the run's record back through.
	Records *firestore.Client
	// Rows is the outage and the count of row transactions.
	Rows *Rows
	// Total is how many rows the run would settle; Concurrency how many it tries at once.
	Total, Concurrency int
	// Budget is the run's budget: it must stop well within it.
	Budget time.Duration
}

// Check runs r and asserts it stopped on the breaker: failed store_unavailable, after at most
// Healthy + StoreBreakerThreshold + 2×Concurrency row transactions (the ones in flight when the
// breaker tripped, and their one retry each), in under half its budget; its record, read back
// without the outage, failed store_unavailable with failed_at and no completed_at. It returns the
// outcome; the caller checks that no row is half written.
func Check(t *testing.T, r Run) workflow.Outcome {
	t.Helper()
	if bound := r.Rows.Healthy + workflow.StoreBreakerThreshold + 2*r.Concurrency; bound*2 > r.Total {
		t.Fatalf("%d rows are too few to tell a run that stopped (at most %d row transactions) from one that went on", r.Total, bound)
	}
	began := time.Now()
	out, err := r.Engine.Start(context.Background(), r.Req)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after %s and %d row transactions of %d rows", took, r.Rows.Attempted(), r.Total)
	var se *workflow.StepError
	if out.Status != workflow.StateFailed || !errors.As(out.Err, &se) || se.Reason != "store_unavailable" {
		t.Fatalf("outcome %s %v, want failed store_unavailable", out.Status, out.Err)
	}
	if bound := r.Rows.Healthy + workflow.StoreBreakerThreshold + 2*r.Concurrency; r.Rows.Attempted() > bound {
		t.Errorf("%d row transactions began, want at most %d: the run went on trying rows with the store down", r.Rows.Attempted(), bound)
	}
	if took > r.Budget/2 {
		t.Errorf("the run took %s to stop, on a budget of %s", took, r.Budget)
	}
	rec, err := runstore.New(r.Records).GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StateFailed || rec.Failure == nil || rec.Failure.Reason != "store_unavailable" || rec.FailedAt.IsZero() || !rec.CompletedAt.IsZero() {
		t.Errorf("record %s %+v failed_at %s completed_at %s, want failed store_unavailable with failed_at and no completed_at",
			rec.Status, rec.Failure, rec.FailedAt, rec.CompletedAt)
	}
	return out
}
