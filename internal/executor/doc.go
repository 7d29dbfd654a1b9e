// Package executor owns what every executor adapter (internal/cloudrun, internal/kubejobs)
// shares with the execution-sync workflow; internal/executor/executortest holds the contract and
// each adapter's tests run it against that adapter's fake.
//
// The contract:
//   - Observe returns a Snapshot for an execution the executor knows, and a Snapshot with
//     VerdictUnknown — not an error — when the executor says it does not know it (NotFound).
//   - Every other failure is an error carrying a gRPC status code, for status.Code. Adapters for
//     non-gRPC executors translate their failures into these codes so the workflow has one
//     vocabulary: Unavailable (a 5xx, a broken connection) is transient and retried by the
//     policy; DeadlineExceeded is transient but not retried (the attempt's budget is spent and
//     the next run asks again); ResourceExhausted stops the run's executor calls for now;
//     PermissionDenied and Unauthenticated stop them and fail the run, since the sweeper is
//     misconfigured (Stops).
//   - Each attempt is bounded by the policy's CallTimeout; attempts are bounded by MaxAttempts.
//   - Target names the place the executor looks (a Cloud Run project and region, a Kubernetes
//     cluster); the blind-executor guard judges all executions of one place as one.
package executor
