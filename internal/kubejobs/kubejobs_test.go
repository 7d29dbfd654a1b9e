package kubejobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stalesweep/stalesweep/internal/executor"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name       string
		job        *batchv1.Job
		want       executor.Verdict
		pending    executor.Verdict
		at         time.Time
		reasonHint string
	}{
		{name: "running", job: runningJob("a"), want: executor.VerdictRunning},
		{name: "Complete after SuccessCriteriaMet is succeeded at completionTime", job: succeededJob("b"), want: executor.VerdictSucceeded, at: finished},
		{name: "Failed after FailureTarget is failed at the Failed transition", job: failedJob("c"), want: executor.VerdictFailed, at: finished, reasonHint: "BackoffLimitExceeded"},
		{name: "SuccessCriteriaMet alone: finishing, outcome known", job: finishingSuccess("d"), want: executor.VerdictRunning, pending: executor.VerdictSucceeded},
		{name: "FailureTarget alone: finishing, outcome known", job: finishingFailure("e"), want: executor.VerdictRunning, pending: executor.VerdictFailed, reasonHint: "DeadlineExceeded"},
		{name: "suspended: not running, not terminal", job: suspendedJob("f"), want: executor.VerdictRunning},
		{name: "failed pods being retried: counters do not decide", job: retryingJob("g"), want: executor.VerdictRunning},
		{name: "a False Complete condition is not terminal", job: job("h", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "False"}}
		}), want: executor.VerdictRunning},
		{name: "succeeded counter without conditions is still running", job: job("i", func(j *batchv1.Job) { j.Status.Succeeded = 1 }), want: executor.VerdictRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := serverRules(tt.job); err != nil {
				t.Fatalf("fixture breaks the API server's rules: %v", err)
			}
			got := Classify(tt.job)
			if got.Verdict != tt.want || got.Pending != tt.pending {
				t.Fatalf("verdict %s pending %q, want %s %q", got.Verdict, got.Pending, tt.want, tt.pending)
			}
			if !got.FinishedAt.Equal(tt.at) {
				t.Errorf("finished at %v, want %v", got.FinishedAt, tt.at)
			}
			if !strings.Contains(got.Reason, tt.reasonHint) {
				t.Errorf("reason %q lacks %q", got.Reason, tt.reasonHint)
			}
			if got.Evidence["uid"] != string(tt.job.UID) || got.Evidence["conditions"] == nil {
				t.Errorf("evidence = %v", got.Evidence)
			}
		})
	}
}

func TestTheFixtureRulesCanFail(t *testing.T) {
	for name, j := range map[string]*batchv1.Job{
		"Failed without FailureTarget": job("x", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailed, "r", "", finished)}
		}),
		"Complete without completionTime": job("y", func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "r", "", finished), cond(batchv1.JobComplete, "r", "", finished)}
		}),
	} {
		if serverRules(j) == nil {
			t.Errorf("%s passed the rules", name)
		}
	}
}

func ref(j *batchv1.Job) map[string]any {
	return map[string]any{"cluster": "eu", "namespace": j.Namespace, "job": j.Name, "uid": string(j.UID)}
}

func adapter(t *testing.T, objs ...runtime.Object) (*Adapter, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	set := NewSet(SetConfig{Client: ClientConfig{Timeout: time.Second}, Ready: map[string]batchclient.BatchV1Interface{"eu": cs.BatchV1()}})
	return New(set, Config{Backoff: time.Millisecond}), cs
}

func TestObserve(t *testing.T) {
	done := succeededJob("done")
	a, _ := adapter(t, done, runningJob("live"))
	ctx := context.Background()

	snap, err := a.Observe(ctx, ref(done))
	if err != nil || snap.Verdict != executor.VerdictSucceeded || snap.Evidence["cluster"] != "eu" {
		t.Errorf("a finished job: %+v %v", snap, err)
	}
	gone := runningJob("gone")
	if snap, err := a.Observe(ctx, ref(gone)); err != nil || snap.Verdict != executor.VerdictUnknown || snap.Evidence["error"] != "not_found" {
		t.Errorf("a deleted job: %+v %v", snap, err)
	}
	other := runningJob("live")
	other.UID = "uid-of-an-earlier-run"
	if snap, err := a.Observe(ctx, ref(other)); err != nil || snap.Verdict != executor.VerdictUnknown || snap.Evidence["found_uid"] != "uid-live" {
		t.Errorf("a job with another uid: %+v %v", snap, err)
	}
	wrongCluster := ref(done)
	wrongCluster["cluster"] = "us"
	if _, err := a.Observe(ctx, wrongCluster); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("an unknown cluster: %v", err)
	}
	if a.ValidRef(map[string]any{"cluster": "eu", "namespace": "n", "job": "j"}) || !a.ValidRef(ref(done)) {
		t.Error("ValidRef disagrees with ParseRef")
	}
}

func TestAPIServerErrorsBecomeTheWorkflowsCodes(t *testing.T) {
	gr := schema.GroupResource{Group: "batch", Resource: "jobs"}
	tests := []struct {
		name  string
		err   error
		code  codes.Code
		calls int
	}{
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), codes.ResourceExhausted, 1},
		{"forbidden", apierrors.NewForbidden(gr, "j", errors.New("no get")), codes.PermissionDenied, 1},
		{"unauthorized", apierrors.NewUnauthorized("who are you"), codes.Unauthenticated, 1},
		{"internal error, retried", apierrors.NewInternalError(errors.New("etcd hiccup")), codes.Unavailable, 3},
		{"unavailable, retried", apierrors.NewServiceUnavailable("restarting"), codes.Unavailable, 3},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), codes.DeadlineExceeded, 1},
		{"no answer at all", errors.New("dial tcp 10.0.0.1:443: connect: connection refused"), codes.Unavailable, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := runningJob("j")
			a, cs := adapter(t, j)
			calls := 0
			cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				return true, nil, tt.err
			})
			_, err := a.Observe(context.Background(), ref(j))
			if status.Code(err) != tt.code || calls != tt.calls {
				t.Errorf("code %s after %d calls (%v), want %s after %d", status.Code(err), calls, err, tt.code, tt.calls)
			}
		})
	}
	j := runningJob("j")
	a, cs := adapter(t, j)
	failures := 2
	cs.PrependReactor("get", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, apierrors.NewServiceUnavailable("restarting")
		}
		return false, nil, nil
	})
	if snap, err := a.Observe(context.Background(), ref(j)); err != nil || snap.Verdict != executor.VerdictRunning {
		t.Errorf("two 503s then an answer: %+v %v", snap, err)
	}
}

func TestParseClusters(t *testing.T) {
	good := `{"clusters": {
	  "prod": {"kubeconfig": "/etc/kube/config", "context": "prod"},
	  "here": {"in_cluster": true},
	  "gke": {"gke": {"endpoint": "34.1.2.3", "ca_data": "Zm9v"}},
	  "lab": {"host": "https://127.0.0.1:6443", "ca_data": "Zm9v", "token_file": "/t"}}}`
	c, err := ParseClusters(good)
	if err != nil || len(c) != 4 || c["gke"].GKE.Endpoint != "34.1.2.3" || !c["here"].InCluster {
		t.Fatalf("%+v %v", c, err)
	}
	for name, bad := range map[string]string{
		"two ways":       `{"clusters": {"x": {"in_cluster": true, "host": "h"}}}`,
		"no way":         `{"clusters": {"x": {"context": "c"}}}`,
		"gke without ca": `{"clusters": {"x": {"gke": {"endpoint": "e"}}}}`,
		"unknown field":  `{"clusters": {"x": {"in_cluster": true, "insecure": true}}}`,
		"not json":       `{"clusters": `,
		"missing file":   `/nonexistent/clusters.json`,
		"trailing text":  `{"clusters": {"x": {"in_cluster": true}}} and more`,
		"empty name":     `{"clusters": {"": {"in_cluster": true}}}`,
		"endless file":   `/dev/zero`,
		"too large":      `{"clusters": {}, "pad": "` + strings.Repeat("x", MaxClustersBytes) + `"}`,
	} {
		if _, err := ParseClusters(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg, err := c["lab"].RESTConfig(context.Background(), ClientConfig{Timeout: 3 * time.Second})
	if err != nil || cfg.Host != "https://127.0.0.1:6443" || string(cfg.CAData) != "foo" || cfg.BearerTokenFile != "/t" || cfg.Timeout != 3*time.Second {
		t.Errorf("rest config = %+v %v", cfg, err)
	}
}
