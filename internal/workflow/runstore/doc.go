// Package runstore is the engine's own bookkeeping in Firestore: the sweep run records
// (sweep_runs) and the scope guards (sweep_guards). A run's record and its guard are created in
// one transaction and ended in one; a guard past its lease is taken over by the next run of its
// scope, which ends the dead run's record.
//
// The collection and field names the ledger's settling transactions also read
// (ledger.RunsCollection, ledger.GuardsCollection, ledger.RunNotable) stay in the ledger.
package runstore
