// Package rosterstore is Dispatch's roster in Firestore (ledger.RosterCollection): the enabled
// organizations' ids, as one tick listed them, in a few shard documents. Only Dispatch writes it;
// no settling transaction reads it.
package rosterstore
