package reliability_test

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stalesweep/stalesweep/internal/kubejobs"
)

// tripwire counts the calls a run makes — every Firestore RPC, every executor call — and
// cancels the run's context as the k-th one starts, before it reaches the wire. Calls are counted
// only while it is armed, which is exactly while one run is in progress on its connections.
type tripwire struct {
	mu     sync.Mutex
	armed  bool
	calls  int
	k      int // the call to cancel at; 0 counts without cancelling
	cancel context.CancelFunc
	fired  string // the call it cancelled at
}

// arm starts counting a run's calls; the k-th (k >= 1) cancels the run through cancel.
func (w *tripwire) arm(k int, cancel context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.calls, w.k, w.cancel, w.fired = true, 0, k, cancel, ""
}

// disarm stops counting and returns how many calls the run started and which one, if any, the
// wire cancelled the run at.
func (w *tripwire) disarm() (calls int, fired string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.cancel = false, nil
	return w.calls, w.fired
}

// tick is one call starting.
func (w *tripwire) tick(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	w.calls++
	if w.calls == w.k && w.cancel != nil {
		w.fired = what
		w.cancel()
	}
}

// dialOptions are the interceptors that count a gRPC connection's calls.
func (w *tripwire) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{w.unaryOption(), w.streamOption()}
}

func (w *tripwire) unaryOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		w.tick(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

func (w *tripwire) streamOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		w.tick(method)
		return streamer(ctx, desc, cc, method, opts...)
	})
}

// trippedClusters counts the Kubernetes API calls of a kubejobs.Clusters.
type trippedClusters struct {
	kubejobs.Clusters
	trip *tripwire
}

func (c trippedClusters) Jobs(cluster, namespace string) (kubejobs.JobGetter, error) {
	jobs, err := c.Clusters.Jobs(cluster, namespace)
	if err != nil {
		return nil, err
	}
	return trippedJobs{jobs: jobs, trip: c.trip}, nil
}

type trippedJobs struct {
	jobs kubejobs.JobGetter
	trip *tripwire
}

// Get counts the call and, like client-go's real transport and unlike the fake clientset, fails
// on a context that is already done.
func (j trippedJobs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error) {
	j.trip.tick("kubernetes get job")
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return j.jobs.Get(ctx, name, opts)
}
