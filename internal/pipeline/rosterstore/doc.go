// Package rosterstore is Dispatch's roster in Firestore (ledger.RosterCollection): the ids of
// the organizations with sweeps enabled, as one tick listed them, in a few shard documents, so
// that a tick reads a few documents for the whole fleet instead of one per organization. Only
// Dispatch writes it; no settling transaction reads it.
package rosterstore
