// Package memstore holds in-memory stores that implement the sweeps' Store interfaces
// (runssweep.Store, pmsweep.Store, leasesettle.Store, executionsync.Store), so that the
// workflows' decision and tally logic can be tested without the Firestore emulator: the fast
// tier, `go test -short`. They never replace the emulator tests; they run beside them, in both
// tiers.
//
// How faithful. Each store keeps its rows in maps under one lock, and each settling call
// (Abandon, ReclaimTask, AbandonLease, Apply, ApplyOnce) runs as one critical section, as the
// ledger's transaction does: it re-reads the row and enforces the same preconditions before it
// writes — the compare-and-swap on what the scan saw (last_moved_at; the heartbeat tip and
// last_activity_at; a lease's or an execution's fresh read handed to the caller's decide, with
// the organization, the run record and the target's judgment it names), the pauses the caller
// names (Pauses: one that holds refuses, ledger.LeftPaused), the status the row must still
// have, the interlock released only when it names the run, and a sync's receipt per run and
// row. The conformance tests of this package hold each store to the ledger's own store, case by
// case, against the emulator in the full tier.
//
// Scans order and filter as the ledger's queries do (the staleness field, then the id) and page
// after a cursor. What Firestore's types do is modelled, not reproduced: a row put with
// Malformed set stands for a document that does not decode (a scan returns it marked, a
// settling call fails on it), and a row put as invisible stands for one whose staleness field is
// missing or not a timestamp (counted among the live rows and by Invisible, never scanned).
// There are no server timestamps: what the ledger stamps with Firestore's time, a store stamps
// with the time the caller passes (the run's now).
//
// Faults are injected as pstest's reactors do: Hooks.Fail makes a call fail, Hooks.Before runs
// before a settling call reads its row, where a test moves the row (its worker was alive after
// all) or ends the run's context. A call whose context is done fails with the context's error
// and reads and writes nothing.
package memstore
