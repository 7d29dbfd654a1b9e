package cloudrun_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/executor/executortest"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The Cloud Run adapter, over emulator/cloudrunfake, holds the executor contract.
func TestCloudRunAdapterConformsToTheExecutorContract(t *testing.T) {
	executortest.Run(t, executortest.Harness{Kind: executionsync.CloudRun, Policy: cloudrun.Config{}.Policy(), New: newFake})
}

// fake is the harness's executor: the Cloud Run fake behind the real client. Faults are the
// fake's own; a flaky fault picks, before each observation, the code the fake fails a rate of
// calls with, from a seeded source of its own (the fake's seeded source picks the calls).
type fake struct {
	srv  *cloudrunfake.Server
	exec executor.Executor

	mu    sync.Mutex
	codes []codes.Code // flaky: the codes to pick from
	rate  float64
	rng   *rand.Rand
	cut   int
}

var projects = [2]string{"p", "q"}

func newFake(t *testing.T, now func() time.Time, limits executortest.Limits) executortest.Fake {
	t.Helper()
	srv, client := cloudruntest.Start(t, cloudrunfake.WithClock(now), cloudrunfake.WithSeed(42))
	f := &fake{srv: srv, rng: rand.New(rand.NewPCG(10, 1))}
	f.exec = cloudrun.New(cutCounter{client, f}, cloudrun.Config{CallTimeout: limits.CallTimeout, MaxAttempts: limits.MaxAttempts, Backoff: time.Millisecond})
	return f
}

func (f *fake) Executor() executor.Executor { return (*picker)(f) }

func (f *fake) Put(target int, state executortest.State, at time.Time) map[string]any {
	name := cloudrunfake.ExecutionName(projects[target], "europe-west1", "job", "exec-"+uuid.NewString()[:8])
	e := cloudrunfake.Running(name, at)
	if state == executortest.Succeeded {
		e = cloudrunfake.Succeeded(name, at)
	}
	if err := f.srv.SetExecution(e); err != nil {
		panic(err) // a name built above is always valid
	}
	return map[string]any{cloudrun.RefKey: name}
}

func (f *fake) Forget(ref map[string]any) {
	name, _ := cloudrun.Name(ref)
	f.srv.RemoveExecution(name)
}

func (f *fake) Calls() int { return f.srv.Calls(cloudrunfake.GetExecution) }

func (f *fake) Flaky(rate float64, cs []codes.Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes, f.rate = cs, rate
}

func (f *fake) FailAll(c codes.Code) { f.srv.FailRate(cloudrunfake.GetExecution, c, 1) }

func (f *fake) FailNext(c codes.Code, n int) { f.srv.FailNext(cloudrunfake.GetExecution, c, n) }

func (f *fake) Delay(d time.Duration) { f.srv.SetLatency(cloudrunfake.GetExecution, d) }

func (f *fake) Cut() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut
}

func (f *fake) UnknownEvidence(ref, ev map[string]any) error {
	if ev["error"] != "NotFound" || ev["execution"] != ref[cloudrun.RefKey] || ev["source"] != "cloud_run" {
		return fmt.Errorf("evidence %v, want Cloud Run's NotFound for %v", ev, ref[cloudrun.RefKey])
	}
	return nil
}

// picker is the adapter as the harness serves it: a flaky fault picks its code per observation.
type picker fake

func (p *picker) ValidRef(ref map[string]any) bool { return p.exec.ValidRef(ref) }
func (p *picker) Target(ref map[string]any) string { return p.exec.Target(ref) }

func (p *picker) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	p.mu.Lock()
	if len(p.codes) > 0 {
		p.srv.FailRate(cloudrunfake.GetExecution, p.codes[p.rng.IntN(len(p.codes))], p.rate)
	}
	p.mu.Unlock()
	return p.exec.Observe(ctx, ref)
}

// cutCounter counts the calls that ended at their own deadline.
type cutCounter struct {
	cloudrun.ExecutionGetter
	f *fake
}

func (c cutCounter) GetExecution(ctx context.Context, req *runpb.GetExecutionRequest, opts ...gax.CallOption) (*runpb.Execution, error) {
	e, err := c.ExecutionGetter.GetExecution(ctx, req, opts...)
	if status.Code(err) != codes.DeadlineExceeded {
		return e, err
	}
	// The server sees the propagated deadline pass a moment before the client does.
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.f.mu.Lock()
		c.f.cut++
		c.f.mu.Unlock()
	}
	return e, err
}
