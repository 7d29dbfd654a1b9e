// Package leasesettle is runner.workspace-lease-settle (seed 004): abandon the workspace leases
// of one runner group whose holder can never finalize them. Abandonment only: nothing is ever
// released on a holder's behalf, reassigned or deleted.
//
// The rules, for each active lease of the group (decide, pure):
//
//	holder resolved and terminal (stopped, terminated, failed)                → abandon: holder_terminal
//	holder resolved and alive                                                → keep, whatever the heartbeat
//	holder unresolvable (missing, or not an instance of this group) and the
//	lease heartbeat older than the group's heartbeat_timeout_seconds         → abandon: holder_unresolvable_heartbeat_stale
//	holder unresolvable, heartbeat fresh                                     → keep for now
//
// Bounded and fair: at most max_settlements leases are abandoned per run, and the run pages
// through the group's active leases (oldest heartbeat first) until that budget is spent or the
// leases run out, so a page full of leases that must be kept never starves the abandonable ones
// behind it. Reads are bounded too (MaxExamined per run; a run that stops there says so). We
// chose paging over a cursor kept between runs: a cursor is one more piece of state to keep
// consistent, and it would skip a lease whose holder died just after the cursor passed it.
//
// One transaction per lease re-reads the lease (still active, same holder, same heartbeat) and
// its holder (still terminal, or still unresolvable) and decides again before abandoning. A
// second run abandons nothing; concurrent runs abandon each lease once.
//
// A dry run (the engine's) is the same run up to the first write: the same scan, decisions and
// storm guard judgment, then each candidate re-read in a read-only transaction that reads what
// the abandoning one reads (LeaseStore.PreviewAbandonLease). It writes nothing; stats.dry_run
// says lease by lease what it would do. Explain judges one lease the same way.
package leasesettle
