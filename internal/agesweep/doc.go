// Package agesweep is the walk the sweeps that settle rows on their age share (runssweep,
// pmsweep, leasesettle): each supplies its scan query, its rule, its transaction and its seed's
// output, and walks the same steps:
//
//	clock       now is read once, from Firestore's clock, and every age in the run is judged on it
//	scan        the scope's aged rows, oldest first, a page at a time, within the sweep's bound; a
//	            row that does not decode is noted (workflow.Malformed) and read past, never settled
//	invisible   the scope's rows no scan can see are counted and reported, never settled
//	guard       the aged rows (all of them, not only this run's share) against the live ones: the
//	            storm verdict; while it holds nothing is settled on age alone
//	settle      one transaction per candidate, on a bounded pool
//	tally       each candidate's result counted in the run's output and stats; in a dry run noted
//	            in its preview
//
// A sweep's Explain reads its row as a run would (Explaining) and skips one no scan reads (Scan).
//
// What holds in Settle:
//   - At most concurrency transactions run at once, the candidates in a random order.
//   - Once the budget (ctx) is spent no further candidate is tried: it is noted with ctx's
//     error, which the tally counts as out of budget, not as a failure.
//   - The first transaction a pause refuses stops the rest: no candidate is tried after it, and
//     each one left is noted as refused by that pause, so a paused run writes nothing more.
//   - A transaction that failed while the budget lasts is tried once more, alone, after the pool
//     has drained (the transaction must be idempotent: it re-reads and re-decides).
//   - Every try is noted with workflow.NoteRow, so that the run's store breaker sees it.
package agesweep
