// Package ledgertest is the reference writer of docs/writers.md in Go: what runners, workers and
// apps write to the collections stalesweep sweeps, as the tables there say, operation by
// operation. stalesweep never writes these documents in production (it only settles them,
// through internal/ledger); the tests and the writer contract's checks (internal/ledger's
// vectors_test.go and nodeworker_test.go) use this package to write them exactly as a writer
// must.
//
// Each writer takes a *firestore.Client and, where a field is judged for staleness
// (extension_runs.last_moved_at, tasks.last_activity_at, workspace_leases.heartbeat_at), a Now.
// A nil Now writes Firestore's server timestamp, as a real writer does; a set Now stands in for
// it, so that a test records a write at a time of its choosing (and a sweep on a test clock
// finds it as old as the test says). The stand-in is written as is: the test that sets it keeps
// it moving forward, as the server's clock does. It replaces whatever the field held, even a
// later time the real server stamped there (a reclaim's last_activity_at: stalesweep's own
// settling transactions always write the server timestamp), so that on a test clock a reclaimed
// task claimed again is as old as the test's clock says.
//
// Product packages do not import it: it is test tooling, as httptest and pstest are.
package ledgertest

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// stamp is the value a writer stores in a staleness field: the server timestamp, or now's time.
func stamp(now func() time.Time) any {
	if now != nil {
		return now().UTC()
	}
	return firestore.ServerTimestamp
}

// runTx runs f as one transaction bounded as the ledger's are by default.
func runTx(ctx context.Context, client *firestore.Client, f func(context.Context, *firestore.Transaction) error) error {
	ctx, cancel := context.WithTimeout(ctx, ledger.TxConfig{}.WithDefaults().Timeout)
	defer cancel()
	return client.RunTransaction(ctx, f, firestore.MaxAttempts(ledger.TxConfig{}.WithDefaults().MaxAttempts))
}
