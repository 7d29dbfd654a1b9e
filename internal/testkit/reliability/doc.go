// Package reliability holds tests only: it checks, against the Firestore emulator, what holds
// of every workflow when its run is cut short and when tenants share one database (issue 10,
// items 2 and 7).
//
// Crashes and timeouts (crash_test.go). Each workflow is run on a handful of seeded rows with
// its context cancelled at a random point — as the k-th call it makes to Firestore or to the
// executor starts, k drawn from [1, N] where N is what an uncancelled run of the same shape makes,
// or by a short deadline — for at least 100 seeded, replayable trials per workflow. What holds:
//
//   - No row is ever torn: every seeded row (with the documents that change with it in the same
//     transaction — an interlock, a task's chain entries) is field by field either untouched or
//     exactly the one complete change its workflow makes to it.
//   - The run record ends terminal (completed or failed) and the scope's guard is released:
//     the engine finishes records on a context detached from the run's.
//   - No goroutine outlives the run (go.uber.org/goleak, against a baseline taken once the
//     clients and fakes are built and no gRPC connection is still being set up; the check's own
//     bite is in leakcheck_test.go).
//   - A second, uncancelled run settles what the first left, and every row is settled exactly
//     once.
//
// Tenant isolation (isolation_test.go). With two or three scopes seeded alike, a run scoped to
// one organization, runner group or queue reads and writes no document of another (documents
// are judged by their scope field or path), every query it runs carries an equality filter on
// the scope, and every other scope's documents are identical before and after. The fleet-wide
// runs sweep has no tenant scope; it is held instead to extension_runs and extension_interlocks.
//
// Each check is also run against a doctored input that it must report, so that none of them
// can pass by never looking.
package reliability
