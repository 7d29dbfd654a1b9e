package kubejobs

import (
	"cmp"
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Defaults of ClientConfig.
const (
	RequestTimeoutDefault = 10 * time.Second
	// QPSDefault and BurstDefault size client-go's token bucket (per cluster and process) for the
	// workflow's concurrency: at client-go's 5 QPS / burst 10, 8 syncs at once queue for tokens
	// inside their per-call timeout. The API server's 429 still stops the run.
	QPSDefault   float32 = 50
	BurstDefault int     = 100
)

// ClientConfig is how the adapter's client-go clients talk to every cluster (zero: the defaults).
type ClientConfig struct {
	// Timeout bounds one HTTP request (rest.Config.Timeout), as CallTimeout bounds an attempt.
	Timeout time.Duration
	// QPS and Burst are client-go's client-side rate limit per cluster; a negative QPS turns it off.
	QPS   float32
	Burst int
	// ClientRetries is client-go's own retries (rest.Request.MaxRetries); the default, 0, leaves
	// them to the executor.RetryPolicy, so they are bounded in one place and a 429 stops the run.
	ClientRetries int
}

// WithDefaults returns c with every zero field set to its default.
func (c ClientConfig) WithDefaults() ClientConfig {
	c.Timeout = cmp.Or(c.Timeout, RequestTimeoutDefault)
	c.QPS = cmp.Or(c.QPS, QPSDefault)
	c.Burst = cmp.Or(c.Burst, BurstDefault)
	c.ClientRetries = max(c.ClientRetries, 0)
	return c
}

func (c ClientConfig) apply(cfg *rest.Config) {
	cfg.Timeout, cfg.QPS, cfg.Burst = c.Timeout, c.QPS, c.Burst
}

// restJobs reads Jobs of one namespace through a batch/v1 REST client, since only
// Request.MaxRetries sets client-go's retry ceiling and the typed client's Get offers no way to.
type restJobs struct {
	client    rest.Interface
	namespace string
	retries   int
}

func (j restJobs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := j.client.Get().Namespace(j.namespace).Resource("jobs").Name(name).
		VersionedParams(&opts, scheme.ParameterCodec).MaxRetries(j.retries).Do(ctx).Into(job)
	if err != nil {
		return nil, err
	}
	return job, nil
}
