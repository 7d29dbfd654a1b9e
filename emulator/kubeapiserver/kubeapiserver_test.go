package kubeapiserver

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const ns = "runners"

// TestRealAPIServerJobs drives Jobs through a real kube-apiserver: the status transitions that
// the fake clientset accepts and the real server rejects, deletion, and an RBAC role that lets a
// sweeper read Jobs and nothing more. It builds the binaries if the cache lacks them (minutes:
// run with -timeout 30m) and fails if it cannot; only -short skips it.
func TestRealAPIServerJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real kube-apiserver takes minutes to build cold")
	}
	ctx := t.Context()
	s, err := Start(ctx, []User{{Name: "sweeper"}}, &lineLogger{t: t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	admin := kubernetes.NewForConfigOrDie(s.RESTConfig("admin"))
	jobs := admin.BatchV1().Jobs(ns)

	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// Seconds: the API serialises times at that precision.
	started := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	finished := metav1.NewTime(time.Now().Truncate(time.Second))

	t.Run("complete", func(t *testing.T) {
		job := startedJob(t, ctx, jobs, "succeeds", started)

		bad := job.DeepCopy()
		bad.Status.Succeeded = 1
		bad.Status.CompletionTime = &finished
		bad.Status.Conditions = append(bad.Status.Conditions, cond(batchv1.JobComplete, "CompletionsReached", finished))
		updateStatus(t, ctx, jobs, bad, "without the SuccessCriteriaMet=true condition")

		job.Status.Succeeded = 1
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", finished))
		job = updateStatus(t, ctx, jobs, job, "")

		bad = job.DeepCopy()
		bad.Status.Conditions = append(bad.Status.Conditions, cond(batchv1.JobComplete, "CompletionsReached", finished))
		updateStatus(t, ctx, jobs, bad, "completionTime is required")

		job.Status.CompletionTime = &finished
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobComplete, "CompletionsReached", finished))
		updateStatus(t, ctx, jobs, job, "")
		got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil || !hasTrue(got, batchv1.JobComplete) || got.Status.CompletionTime == nil {
			t.Fatalf("get completed job: %v, status %+v", err, got.Status)
		}
	})

	t.Run("fail", func(t *testing.T) {
		job := startedJob(t, ctx, jobs, "fails", started)

		bad := job.DeepCopy()
		bad.Status.Failed = 1
		bad.Status.Conditions = append(bad.Status.Conditions, cond(batchv1.JobFailed, "BackoffLimitExceeded", finished))
		updateStatus(t, ctx, jobs, bad, "without the FailureTarget=true condition")

		job.Status.Failed = 1
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", finished))
		job = updateStatus(t, ctx, jobs, job, "")
		job.Status.Conditions = append(job.Status.Conditions, cond(batchv1.JobFailed, "BackoffLimitExceeded", finished))
		job = updateStatus(t, ctx, jobs, job, "")
		if !hasTrue(job, batchv1.JobFailed) {
			t.Fatalf("failed job's status: %+v", job.Status)
		}
	})

	t.Run("delete", func(t *testing.T) {
		job := createJob(t, ctx, jobs, "deleted")
		background := metav1.DeletePropagationBackground
		if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatalf("delete job: %v", err)
		}
		if _, err := jobs.Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get deleted job: want NotFound, got %v", err)
		}
		// batch/v1's default propagation is Orphan: the server adds the "orphan" finalizer that
		// only the garbage collector (not running here) removes, so the Job stays.
		job = createJob(t, ctx, jobs, "orphaned")
		if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete job: %v", err)
		}
		got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerOrphanDependents) {
			t.Fatalf("get job deleted with default propagation: %v, finalizers %v", err, got.Finalizers)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		sweeper := kubernetes.NewForConfigOrDie(s.RESTConfig("sweeper")).BatchV1().Jobs(ns)
		job := createJob(t, ctx, jobs, "watched")
		if _, err := sweeper.Get(ctx, job.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("sweeper gets a job before any binding: want Forbidden, got %v", err)
		}
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "job-reader", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}}},
		}
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role: %v", err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "sweeper-job-reader", Namespace: ns},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "sweeper"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "job-reader"},
		}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create role binding: %v", err)
		}
		// The authorizer sees new bindings through an informer: a moment later, not at once.
		var got *batchv1.Job
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if got, err = sweeper.Get(ctx, job.Name, metav1.GetOptions{}); err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || got.Name != job.Name {
			t.Fatalf("sweeper gets a job with the role: %v", err)
		}
		if _, err := sweeper.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("sweeper lists jobs: want Forbidden, got %v", err)
		}
		got.Labels = map[string]string{"touched": "yes"}
		if _, err := sweeper.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("sweeper updates a job: want Forbidden, got %v", err)
		}
		if _, err := sweeper.UpdateStatus(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("sweeper updates a job's status: want Forbidden, got %v", err)
		}
	})
}

type jobClient interface {
	Create(context.Context, *batchv1.Job, metav1.CreateOptions) (*batchv1.Job, error)
	UpdateStatus(context.Context, *batchv1.Job, metav1.UpdateOptions) (*batchv1.Job, error)
}

// startedJob creates a job and records its start at started, as the job controller does when its
// pod starts.
func startedJob(t *testing.T, ctx context.Context, jobs jobClient, name string, started metav1.Time) *batchv1.Job {
	t.Helper()
	job := createJob(t, ctx, jobs, name)
	job.Status.StartTime = &started
	return updateStatus(t, ctx, jobs, job, "")
}

func createJob(t *testing.T, ctx context.Context, jobs jobClient, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}}},
		}}},
	}
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job %s: %v", name, err)
	}
	return created
}

// updateStatus writes job's status through the status subresource. With rejection "" it must be
// accepted and the stored Job is returned; otherwise it must be refused as Invalid with a message
// containing rejection.
func updateStatus(t *testing.T, ctx context.Context, jobs jobClient, job *batchv1.Job, rejection string) *batchv1.Job {
	t.Helper()
	got, err := jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{})
	switch {
	case rejection == "" && err != nil:
		t.Fatalf("update status of %s: %v", job.Name, err)
	case rejection != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), rejection)):
		t.Fatalf("update status of %s: want Invalid %q, got %v", job.Name, rejection, err)
	case rejection != "":
		t.Logf("rejected as expected: %v", err)
	}
	return got
}

func cond(typ batchv1.JobConditionType, reason string, at metav1.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastProbeTime: at, LastTransitionTime: at}
}

func hasTrue(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// lineLogger sends whole lines to t.Log (the build's progress, the start time).
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.t.Log(strings.TrimRight(line, "\n"))
	}
}
