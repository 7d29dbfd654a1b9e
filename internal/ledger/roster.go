package ledger

// RosterCollection holds the roster: the ids of the organizations with sweeps enabled, as one
// tick listed them, in a few documents. A tick reads the roster instead of every organizations
// document: a few reads for the whole fleet instead of one per organization. Dispatch rebuilds
// it from the listing when it is older than its maximum age; only Dispatch writes it.
//
//   - sweep_roster/current: the roster in use — the version (the tick that built it), when it
//     was finished, and the last of its ids.
//   - sweep_roster/{version}-{hash}: one shard: the ids after `after`, in id order, up to and
//     including `last`, of one version (shard_of).
const RosterCollection = "sweep_roster"
