package indexes

import (
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// TTL is one collection (or collection group) of stalesweep's bookkeeping whose documents
// carry ledger.ExpireField.
type TTL struct {
	// Collection is the collection id; a collection group when Group is set (the receipts,
	// sweep_runs/{uuid}/syncs, are one collection per run).
	Collection string
	Group      bool
	// What says what its documents are and when they expire, for the docs and the gc output.
	What string
}

// Expiring is the one list of what expires: gc ranges over it, and it is the source
// of the Terraform TTL policies (the command's indexes). Receipts come before runs: gc deletes a
// run's receipts before the run. sweep_clock is never written and the rows the runners, workers
// and apps own (runner_executions, extension_runs, tasks and their chains, leases, ...) never
// expire.
func Expiring() []TTL {
	return []TTL{
		{Collection: ledger.SyncsCollection, Group: true, What: "sync receipts: with their run or before it"},
		{Collection: ledger.RunsCollection, What: "run records: retention after the run finished (notable if it failed, settled lost or was held back by a guard)"},
		{Collection: ledger.GuardsCollection, What: "scope guards left by a run that never released them: notable retention after it was taken"},
		{Collection: ledger.TargetsCollection, What: "blind-executor judgments: retention after the last judgment or clearance (notable while blind)"},
		{Collection: ledger.RosterCollection, What: "the roster and its shards: retention after they were written"},
		{Collection: pausestore.PausesCollection, What: "pauses: one with an end (--for) at its end, when it refuses nothing more; an open-ended one never (resume deletes it)"},
	}
}
