// Package executor owns what every executor adapter (internal/cloudrun, internal/kubejobs)
// shares with the execution-sync workflow; internal/executor/executortest holds the contract and
// each adapter's tests run it against that adapter's fake.
//
// The contract: Observe returns a Snapshot with VerdictUnknown — not an error — when the executor
// does not know the execution (NotFound); every other failure is an error carrying a gRPC status
// code, non-gRPC executors translating theirs, so the workflow has one vocabulary
// (docs/architecture.md, "Failure handling"): Unavailable is retried by the policy,
// DeadlineExceeded is not (the attempt's budget is spent and the next run asks again), and Stops
// says which codes stop the run's calls. Target names the place the executor looks (a Cloud Run
// project and region, a Kubernetes cluster); the blind-executor guard judges it as one.
package executor
