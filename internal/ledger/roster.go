package ledger

// RosterCollection holds the roster: the ids of the organizations with sweeps enabled, as one
// tick listed them, in a few documents, so that a tick costs a few reads for the whole fleet
// instead of one per organization. Only Dispatch writes it.
const RosterCollection = "sweep_roster"
