// Package targetstore keeps the blind-executor guard's judgments of executor targets
// (ledger.TargetsCollection): written by the guard and cleared by an operator. The settling
// transaction of a sync reads a judgment (ledger.Target) with its row; only this package writes one.
package targetstore
