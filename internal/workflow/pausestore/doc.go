// Package pausestore owns the pause document (Pause, its ids and its collection): where an
// operator's pauses are written, resumed and listed, and where a run's start looks for one that
// covers it. Every settling transaction of the ledger reads the pauses that cover its row with
// the row (PauseIDs) and leaves the row when one holds (ActivePause), so this package imports
// nothing of stalesweep's.
package pausestore
