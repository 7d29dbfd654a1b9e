package executionsync_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// lostAnswers is a fault between the Firestore client and the emulator: a commit that settles a
// runner execution reaches the server, lands, and its answer is replaced by fail's error — the
// answer lost on the way back. Only the first such commit of each row is faulted.
type lostAnswers struct {
	fail func(ctx context.Context) error

	mu      sync.Mutex
	faulted []string // the rows whose settling commit landed and was answered with an error
}

func (l *lostAnswers) dial() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c, ok := req.(*firestorepb.CommitRequest)
		if !ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		row := settledRow(c)
		l.mu.Lock()
		fault := row != "" && !slices.Contains(l.faulted, row)
		l.mu.Unlock()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil || !fault {
			return err
		}
		l.mu.Lock()
		l.faulted = append(l.faulted, row)
		l.mu.Unlock()
		return l.fail(ctx)
	})
}

func (l *lostAnswers) rows() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.faulted)
}

// settledRow names the runner execution a commit settles, or "".
func settledRow(c *firestorepb.CommitRequest) string {
	for _, w := range c.GetWrites() {
		name := w.GetUpdate().GetName()
		if strings.Contains(name, "/"+ledger.ExecutionsCollection+"/") && slices.Contains(w.GetUpdateMask().GetFieldPaths(), "settlement") {
			return name[strings.LastIndex(name, "/")+1:]
		}
	}
	return ""
}

// A settling commit that landed while the client heard an error (Unavailable, which the client
// retries, to be told the transaction is closed; or a deadline that fell after the commit was
// sent) is read back: the row carries this run's settlement, so the run counts it settled and
// lists it started, not raced, errored or deferred.
func TestAmbiguousCommitThatLandedCountsAsSettledByTheRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		budget time.Duration
		fail   func(ctx context.Context) error
	}{
		{name: "Unavailable after the commit landed", fail: func(context.Context) error {
			return status.Error(codes.Unavailable, "injected: the commit landed, its answer did not")
		}},
		// The run's budget ends while the commit's answer is awaited: the pool has no time to
		// try the row again, so only reading the row back can tell.
		{name: "the run's deadline after the commit was sent", budget: 3 * time.Second, fail: func(ctx context.Context) error {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			faults := &lostAnswers{fail: c.fail}
			e := newEnv(t, options{cfg: executionsync.Config{Budget: c.budget, Concurrency: 1}, dial: []grpc.DialOption{faults.dial()}})
			row := e.stale(succeeded)

			out := e.start(map[string]any{"limit": 10})
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run %s: %v", out.Status, out.Err)
			}
			if got := faults.rows(); !slices.Equal(got, []string{row}) {
				t.Fatalf("faulted commits of %v, want the one of %s: the fault was not injected", got, row)
			}
			r := e.get(row)
			if r.Active || r.Outcome != ledger.OutcomeSucceeded || r.Settlement == nil || r.Settlement.WorkflowRunUUID != out.RunUUID {
				t.Fatalf("row after the run: active=%t outcome=%q settlement=%+v, want settled succeeded by run %s", r.Active, r.Outcome, r.Settlement, out.RunUUID)
			}
			o, s := outputOf(t, out)
			if s.Settled[ledger.OutcomeSucceeded] != 1 || s.Raced != 0 || s.Errored != 0 || s.Deferred != 0 {
				t.Errorf("stats = %s, want settled succeeded 1 and nothing raced, errored or deferred", s)
			}
			if !slices.Equal(o.StartedRunnerExecutionUUIDs, []string{row}) || o.FailedStartCount != 0 {
				t.Errorf("started %v, failed %v; want %s started", o.StartedRunnerExecutionUUIDs, o.FailedRunnerExecutionUUIDs, row)
			}
		})
	}
}
