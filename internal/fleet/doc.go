// Package fleet is what an operator sees of the whole fleet at once: the organizations, enabled
// or not, each with the last run of its workflows and its oldest stale row (Organizations), and
// what the next tick would do (Status).
//
// What holds:
//   - It only reads. Status runs the dispatcher itself — the same enumeration (the roster, the
//     runner groups, the queues), the same pauses and the same probes a tick runs — on a
//     Firestore connection that refuses every write (ReadOnly) and with a publisher that keeps
//     what it is given, so it costs what a tick costs and can change nothing.
//   - Every answer is bounded: a page of organizations (at most orgadmin.ListMax),
//     one query per workflow for each organization shown, one row per scope with work shown,
//     and the lists of scopes cut at a limit that says how many more there were.
package fleet
