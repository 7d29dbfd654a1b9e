// Package runstore is the engine's own bookkeeping in Firestore: the sweep run records
// (sweep_runs, one per workflow run) and the scope guards (sweep_guards, one per workflow type
// and scope while a run of it is in progress). A run's record and its guard are created in one
// transaction and ended in one; a guard past its lease is taken over by the next run of its
// scope, which ends the dead run's record.
//
// These are sweep runs, not extension runs: the extension_runs documents the apps write, and
// the transactions that settle them, are internal/ledger's. The collection and field names that
// both read (ledger.RunsCollection, ledger.GuardsCollection, ledger.RunNotable) stay in the
// ledger, whose settling transactions mark a run notable and whose indexes and retention cover
// these collections.
package runstore
