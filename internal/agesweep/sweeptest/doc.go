// Package sweeptest is the conformance suite of the age sweeps (runssweep, pmsweep,
// leasesettle): what every sweep that settles on age must hold, run by each sweep's own tests
// against the Firestore emulator with its own store. The suite holds the contract; each sweep
// gives it how to write its rows and how to read what its run settled, with its own assertions.
// Test code only: no product package imports it.
package sweeptest
