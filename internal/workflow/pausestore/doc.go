// Package pausestore is where an operator's pauses are written, resumed and listed, and where
// a run's start looks for one that covers it. The pause document itself (ledger.Pause, its ids
// and its collection) is the ledger's, since every settling transaction reads the pauses that
// cover its row with the row and leaves it when one holds.
package pausestore
