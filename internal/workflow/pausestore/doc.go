// Package pausestore writes, resumes and lists an operator's pauses, and finds the one covering a
// run's start. The pause document itself is the ledger's: every settling transaction reads it.
package pausestore
