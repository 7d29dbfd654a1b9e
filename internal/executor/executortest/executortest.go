// Package executortest is the conformance suite of executor.Executor: what every executor
// adapter, and the execution-sync workflow over it, guarantee when the executor fails,
// throttles, forgets, refuses or stalls. Each adapter's own test calls Run with a Harness over
// its own fake (river's riverdrivertest serves every driver the same way): Cloud Run with
// emulator/cloudrunfake, Kubernetes with client-go's fake clientset. What is particular to one
// executor — how its native errors map to codes, which 404 is the executor's own — stays in that
// adapter's tests.
//
// The suite asks for faults by gRPC code; a harness answers with its executor's native
// equivalent (Kubernetes: 503 for Unavailable, 504 for DeadlineExceeded, 429, 403, 401), so the
// adapter's mapping is in the path. The workflow cases run against the Firestore emulator: the
// calling package's TestMain must call testenv.Main.
//
// It is imported by tests only.
package executortest

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
)

// Harness is one executor adapter under test.
type Harness struct {
	// Kind is the execution-sync workflow of the adapter's executor.
	Kind executionsync.Kind
	// Policy is the retry policy the adapter declares (its Config{}.Policy()); the suite holds
	// the adapter to it.
	Policy executor.RetryPolicy
	// New starts a fake executor for one test, stamping times with now, and returns it with the
	// adapter over it configured with limits (zero fields: the adapter's defaults) and a backoff
	// of a millisecond. The fake is stopped when the test ends.
	New func(t *testing.T, now func() time.Time, limits Limits) Fake
}

// Limits are the adapter settings a case sets; zero fields take the adapter's defaults.
type Limits struct {
	CallTimeout time.Duration
	MaxAttempts int
}

// State is the state an execution is put in.
type State int

// The states.
const (
	Running State = iota
	Succeeded
)

// Fake is one test's executor: its executions, its faults and its count of calls. Every method
// is safe for concurrent use. A fault method replaces the faults set before it.
type Fake interface {
	// Executor is the adapter over the fake.
	Executor() executor.Executor
	// Put creates an execution in state, finished (if it is) at about at, on target 0 or 1 (two
	// places the executor looks: projects, clusters), and returns the provider_ref naming it.
	Put(target int, state State, at time.Time) map[string]any
	// Forget makes the executor forget the execution ref names: NotFound from now on.
	Forget(ref map[string]any)
	// Calls counts the calls (attempts) the executor has been sent.
	Calls() int
	// Flaky fails a seeded random fraction rate of calls, each with one of cs.
	Flaky(rate float64, cs []codes.Code)
	// FailAll fails every call with c.
	FailAll(c codes.Code)
	// FailNext fails the next n calls with c.
	FailNext(c codes.Code, n int)
	// Delay makes every call take d before it is answered; a call whose context ends first is
	// answered with the executor's own report of that.
	Delay(d time.Duration)
	// Cut counts the calls that ran until their own context's deadline.
	Cut() int
	// UnknownEvidence checks the evidence of a VerdictUnknown snapshot of ref: it names the
	// execution and says the executor did not find it.
	UnknownEvidence(ref, evidence map[string]any) error
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("Observe", func(t *testing.T) { runObserve(t, h) })
	t.Run("Workflow", func(t *testing.T) { runWorkflow(t, h) })
}
