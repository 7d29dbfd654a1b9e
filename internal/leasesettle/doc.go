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
// through the group's active leases (oldest heartbeat first), so a page of leases that must be
// kept never starves the abandonable ones behind it. We chose paging over a cursor kept between
// runs: a cursor would skip a lease whose holder died just after the cursor passed it.
//
// One transaction per lease re-reads the lease and its holder and decides again before
// abandoning; concurrent runs abandon each lease once.
package leasesettle
