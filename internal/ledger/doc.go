// Package ledger is stalesweep's Firestore layer: the documents runners write and stalesweep
// settles, the composite indexes the queries need, and the transactions that settle one row at a
// time.
//
// What holds:
//   - Every query is scoped, bounded by a limit, ordered on the indexed inequality field, and
//     paged with a cursor, never an offset; a test holds every query to the declared composite
//     indexes (the emulator checks none, production does).
//   - Every settlement is one transaction that re-reads its row, decides again on what it read,
//     and writes only if the row is still in the state the decision was made on. Reads come
//     before writes, attempts are bounded, and each transaction has its own timeout. The body
//     may run more than once, so it builds its writes afresh on every attempt.
package ledger
