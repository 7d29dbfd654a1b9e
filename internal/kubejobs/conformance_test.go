package kubejobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/executor/executortest"
)

// The Kubernetes adapter, over client-go's fake clientset, holds the executor contract. Faults
// are a reactor on the clientset answering with the API server's own errors, which Code maps
// (TestAPIServerErrorsBecomeTheWorkflowsCodes).
func TestKubernetesAdapterConformsToTheExecutorContract(t *testing.T) {
	executortest.Run(t, executortest.Harness{Kind: executionsync.Kubernetes, Policy: Config{}.Policy(), New: newKubeFake})
}

// clusterNames are the harness's two targets, both served by one clientset.
var clusterNames = [2]string{"eu", "us"}

// kubeFake is the harness's executor: a fake clientset as clusters eu and us, reached through a
// Set, with one reactor that answers each get as the current fault says.
type kubeFake struct {
	cs   *fake.Clientset
	exec *Adapter
	ctxs sync.Map // "namespace/job" → the context of the get in progress

	mu    sync.Mutex
	fault func(job string) error // nil: no fault; called under mu
	delay time.Duration
	cut   int
	jobs  int
}

func newKubeFake(t *testing.T, _ func() time.Time, limits executortest.Limits) executortest.Fake {
	f := &kubeFake{cs: fake.NewClientset()}
	ready := map[string]batchclient.BatchV1Interface{}
	for _, c := range clusterNames {
		ready[c] = f.cs.BatchV1()
	}
	set := NewSet(SetConfig{Client: ClientConfig{Timeout: time.Second}, Ready: ready})
	f.exec = New(ctxClusters{set, f}, Config{CallTimeout: limits.CallTimeout, MaxAttempts: limits.MaxAttempts, Backoff: time.Millisecond})
	f.cs.PrependReactor("get", "jobs", f.react)
	return f
}

func (f *kubeFake) Executor() executor.Executor { return f.exec }

func (f *kubeFake) Put(target int, state executortest.State, _ time.Time) map[string]any {
	f.mu.Lock()
	f.jobs++
	name := fmt.Sprintf("build-%d", f.jobs)
	f.mu.Unlock()
	j := runningJob(name)
	if state == executortest.Succeeded {
		j = succeededJob(name)
	}
	j, err := f.cs.BatchV1().Jobs(j.Namespace).Create(context.Background(), j, metaCreate)
	if err != nil {
		panic(err) // a fresh name in an empty clientset
	}
	return map[string]any{"cluster": clusterNames[target], "namespace": j.Namespace, "job": j.Name, "uid": string(j.UID)}
}

func (f *kubeFake) Forget(ref map[string]any) {
	r, _ := ParseRef(ref)
	if err := f.cs.BatchV1().Jobs(r.Namespace).Delete(context.Background(), r.Job, metav1.DeleteOptions{}); err != nil {
		panic(err)
	}
}

func (f *kubeFake) Calls() int {
	n := 0
	for _, a := range f.cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

func (f *kubeFake) Flaky(rate float64, cs []codes.Code) {
	rng := rand.New(rand.NewPCG(10, 2))
	f.setFault(func(job string) error {
		if rng.Float64() >= rate {
			return nil
		}
		return apiError(cs[rng.IntN(len(cs))], job)
	})
}

func (f *kubeFake) FailAll(c codes.Code) {
	f.setFault(func(job string) error { return apiError(c, job) })
}

func (f *kubeFake) FailNext(c codes.Code, n int) {
	f.setFault(func(job string) error {
		if n == 0 {
			return nil
		}
		n--
		return apiError(c, job)
	})
}

func (f *kubeFake) setFault(fault func(string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

func (f *kubeFake) Delay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

func (f *kubeFake) Cut() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cut
}

func (f *kubeFake) UnknownEvidence(ref, ev map[string]any) error {
	if ev["error"] != "not_found" || ev["source"] != "kubernetes" || ev["job"] != ref["job"] || ev["cluster"] != ref["cluster"] {
		return fmt.Errorf("evidence %v, want the API server's NotFound for %v", ev, ref)
	}
	return nil
}

// react answers a get as the fault says, after the delay; a get whose context ends first is
// answered as the real client answers it, with an error that wraps the context's.
func (f *kubeFake) react(a k8stesting.Action) (bool, runtime.Object, error) {
	name := a.(k8stesting.GetAction).GetName()
	f.mu.Lock()
	var err error
	if f.fault != nil {
		err = f.fault(name)
	}
	delay := f.delay
	f.mu.Unlock()
	if delay > 0 {
		ctx, ok := f.ctxs.Load(a.GetNamespace() + "/" + name)
		if !ok {
			return true, nil, fmt.Errorf("get %s did not come through ctxClusters", name)
		}
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.(context.Context).Done():
			err := ctx.(context.Context).Err()
			f.mu.Lock()
			if errors.Is(err, context.DeadlineExceeded) {
				f.cut++
			}
			f.mu.Unlock()
			return true, nil, &url.Error{Op: "Get", URL: "https://eu.example/apis/batch/v1/namespaces/runners/jobs/" + name, Err: err}
		}
	}
	return err != nil, nil, err
}

// apiError is the API server's answer that Code maps to c.
func apiError(c codes.Code, job string) error {
	switch c {
	case codes.Unavailable:
		return apierrors.NewServiceUnavailable("the API server is restarting")
	case codes.DeadlineExceeded:
		return apierrors.NewTimeoutError("get "+job+" timed out", 1)
	case codes.ResourceExhausted:
		return apierrors.NewTooManyRequests("the API server is throttling this client", 1)
	case codes.PermissionDenied:
		return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, job, errors.New(`User "stalesweep" cannot get resource "jobs"`))
	case codes.Unauthenticated:
		return apierrors.NewUnauthorized("the token has expired")
	}
	panic("no API server error maps to " + c.String())
}

// ctxClusters serves the Set's clusters and lets the reactor find the context of the get it
// answers: the fake clientset hands reactors only the action, while the real client carries the
// context into the request and gives up on it when the context ends.
type ctxClusters struct {
	set *Set
	f   *kubeFake
}

func (c ctxClusters) Jobs(cluster, namespace string) (JobGetter, error) {
	jobs, err := c.set.Jobs(cluster, namespace)
	if err != nil {
		return nil, err
	}
	return ctxJobs{jobs, c.f, namespace}, nil
}

type ctxJobs struct {
	JobGetter
	f         *kubeFake
	namespace string
}

func (j ctxJobs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error) {
	key := j.namespace + "/" + name
	j.f.ctxs.Store(key, ctx)
	defer j.f.ctxs.Delete(key)
	return j.JobGetter.Get(ctx, name, opts)
}
