// Package kubejobs is the Kubernetes executor adapter: it reads a batch/v1 Job, named by a row's
// provider_ref {cluster, namespace, job, uid}, from one of the configured clusters and reduces it
// to an executor.Snapshot.
//
// Only Config's executor.RetryPolicy retries: client-go's own Retry-After retries are off and its
// client-side rate limit is sized for the workflow's concurrency (ClientConfig). NotFound — a Job
// deleted by ttlSecondsAfterFinished, or by hand — is unknown, not failure; so is a Job of the
// same name with another uid, which is a different execution. The adapter needs only `get` on
// jobs in the rows' namespaces (docs/operations.md has the Role).
package kubejobs

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// JobGetter reads one Job; the typed clientset's BatchV1().Jobs(namespace) has it.
type JobGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error)
}

// Clusters finds the Jobs of a namespace on a named cluster.
type Clusters interface {
	Jobs(cluster, namespace string) (JobGetter, error)
}

// ErrUnknownCluster is a row naming a cluster the sweeper has no configuration for.
var ErrUnknownCluster = errors.New("cluster not configured")

// Config bounds the adapter's calls to the API servers; their errors are coded by Code.
type Config = executor.Config

// Adapter observes Kubernetes Jobs.
type Adapter struct {
	clusters Clusters
	policy   executor.RetryPolicy
}

// New returns an adapter over clusters.
func New(clusters Clusters, cfg Config) *Adapter {
	return &Adapter{clusters: clusters, policy: cfg.Policy()}
}

// Ref is a row's provider_ref for a Kubernetes Job.
type Ref struct {
	Cluster, Namespace, Job, UID string
}

// ParseRef reads a provider_ref; ok is false unless all four fields are non-empty strings.
func ParseRef(ref map[string]any) (Ref, bool) {
	get := func(k string) string { s, _ := ref[k].(string); return s }
	r := Ref{Cluster: get("cluster"), Namespace: get("namespace"), Job: get("job"), UID: get(RefUID)}
	return r, r.Cluster != "" && r.Namespace != "" && r.Job != "" && r.UID != ""
}

// ValidRef reports whether a row's provider_ref names a Job.
func (a *Adapter) ValidRef(ref map[string]any) bool {
	_, ok := ParseRef(ref)
	return ok
}

// Target is the cluster of the Job ref names: "kubernetes:CLUSTER".
func (a *Adapter) Target(ref map[string]any) string {
	r, ok := ParseRef(ref)
	if !ok {
		return ""
	}
	return "kubernetes:" + r.Cluster
}

// Observe reads the Job ref names and classifies it.
func (a *Adapter) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	r, ok := ParseRef(ref)
	if !ok {
		return executor.Snapshot{}, status.Errorf(codes.InvalidArgument, "provider_ref %v does not name a Job", ref)
	}
	jobs, err := a.clusters.Jobs(r.Cluster, r.Namespace)
	if err != nil {
		return executor.Snapshot{}, status.Errorf(codes.FailedPrecondition, "cluster %q: %v", r.Cluster, err)
	}
	var snap executor.Snapshot
	attempts, err := a.policy.Do(ctx, Code, func(ctx context.Context) error {
		job, err := jobs.Get(ctx, r.Job, metav1.GetOptions{})
		switch {
		case err == nil && string(job.UID) != r.UID:
			snap = unknown(r, "uid_mismatch", string(job.UID))
		case err == nil:
			snap = Classify(job)
			snap.Evidence["cluster"] = r.Cluster
		case ownNotFound(err, r.Job):
			snap = unknown(r, "not_found", "")
		default:
			return err
		}
		return nil
	})
	switch {
	case err == nil:
		return snap, nil
	case ctx.Err() != nil:
		return executor.Snapshot{}, fmt.Errorf("get job %s/%s on %s: %w", r.Namespace, r.Job, r.Cluster, ctx.Err())
	default:
		return executor.Snapshot{}, status.Errorf(Code(err), "get job %s/%s on %s (attempt %d): %v", r.Namespace, r.Job, r.Cluster, attempts, err)
	}
}

func unknown(r Ref, why, foundUID string) executor.Snapshot {
	ev := map[string]any{"source": "kubernetes", "cluster": r.Cluster, "namespace": r.Namespace, "job": r.Job, "uid": r.UID, "error": why}
	if foundUID != "" {
		ev["found_uid"] = foundUID
	}
	return executor.Snapshot{Verdict: executor.VerdictUnknown, Evidence: ev}
}

// ownNotFound reports whether err is the API server's own answer that the Job named job does not
// exist: a Status of reason NotFound naming that Job. A 404 without one (a proxy, a server that
// is not Kubernetes) says nothing about the Job: it is an error (Code).
func ownNotFound(err error, job string) bool {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Reason != metav1.StatusReasonNotFound {
		return false
	}
	d := se.ErrStatus.Details
	if d == nil || d.Kind != "jobs" || d.Name != job {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false // client-go made the Status up from a body that was not one
		}
	}
	return true
}

// Code maps an API server error onto the gRPC code the workflow reasons with.
func Code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case apierrors.IsNotFound(err):
		// A Job's own NotFound never gets here; any other 404 is not the executor saying so.
		return codes.FailedPrecondition
	case apierrors.IsTooManyRequests(err):
		return codes.ResourceExhausted
	case apierrors.IsForbidden(err):
		return codes.PermissionDenied
	case apierrors.IsUnauthorized(err):
		return codes.Unauthenticated
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return codes.DeadlineExceeded
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return codes.Unavailable
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if c := se.Status().Code; c >= 500 {
			return codes.Unavailable
		}
		return codes.Unknown
	}
	return codes.Unavailable // no answer at all: a broken connection, a refused dial
}
