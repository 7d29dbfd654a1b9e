package kubejobs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stalesweep/stalesweep/emulator/kubeapiserver"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// The real-API-server tier: Jobs driven through the real status subresource (which enforces
// the rules the fake clientset does not), the workflow syncing rows against them through a
// cluster configured as an operator would (host, CA, token file), with RBAC that grants the
// sweeper nothing but get on jobs; then the event path, a Job's end event settling its row on the
// same server's word.
func TestWorkflowAgainstARealAPIServerWithGetOnlyRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real kube-apiserver takes minutes to build cold")
	}
	ctx := context.Background()
	srv, err := kubeapiserver.Start(ctx, []kubeapiserver.User{{Name: "stalesweep"}}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	admin := kubernetes.NewForConfigOrDie(srv.RESTConfig("admin"))
	const ns = "runners"
	must(t, create(ctx, admin, ns))

	jobs := admin.BatchV1().Jobs(ns)
	mk := func(name string) *batchv1.Job {
		j, err := jobs.Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}, metav1.CreateOptions{})
		must(t, err)
		return j
	}
	setStatus := func(j *batchv1.Job, mod func(*batchv1.JobStatus)) *batchv1.Job {
		t.Helper()
		cur, err := jobs.Get(ctx, j.Name, metav1.GetOptions{})
		must(t, err)
		mod(&cur.Status)
		out, err := jobs.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		must(t, err)
		return out
	}
	start := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	end := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	condition := func(tp batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: tp, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: end}
	}

	ok, bad, gone, live := mk("ok"), mk("bad"), mk("gone"), mk("live")
	setStatus(ok, func(s *batchv1.JobStatus) {
		s.StartTime, s.Succeeded, s.CompletionTime = &start, 1, &end
		s.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), condition(batchv1.JobComplete, "CompletionsReached")}
	})
	setStatus(bad, func(s *batchv1.JobStatus) {
		s.StartTime, s.Failed = &start, 1
		s.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget, "BackoffLimitExceeded")}
	})
	setStatus(live, func(s *batchv1.JobStatus) { s.StartTime, s.Active = &start, 1 })
	background := metav1.DeletePropagationBackground
	must(t, jobs.Delete(ctx, gone.Name, metav1.DeleteOptions{PropagationPolicy: &background}))

	// The sweeper's access: get on jobs in the namespace, nothing else.
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "stalesweep-job-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stalesweep-job-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "stalesweep-job-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "stalesweep"}}}, metav1.CreateOptions{})
	must(t, err)

	// The cluster as an operator configures it.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	must(t, os.WriteFile(tokenFile, []byte(srv.Tokens["stalesweep"]), 0o600))
	cfgJSON, _ := json.Marshal(map[string]any{"clusters": map[string]any{"lab": map[string]any{
		"host": srv.URL, "ca_data": base64.StdEncoding.EncodeToString(srv.CAData), "token_file": tokenFile}}})
	clusters, err := ParseClusters(string(cfgJSON))
	must(t, err)
	a := New(NewSet(SetConfig{Clusters: clusters, Client: ClientConfig{Timeout: 5 * time.Second}}), Config{Backoff: 10 * time.Millisecond})
	// RoleBindings reach the authorizer through a cache: wait until the sweeper may get a Job.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := a.Observe(ctx, refOf(live)); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the sweeper cannot get Jobs with its Role: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the authorizer's cache
	}
	// And it can do nothing more.
	sweeper := kubernetes.NewForConfigOrDie(srv.RESTConfig("stalesweep"))
	if _, err := sweeper.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the sweeper may list jobs: %v", err)
	}
	if err := sweeper.BatchV1().Jobs(ns).Delete(ctx, "live", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the sweeper may delete jobs: %v", err)
	}

	fs := testenv.Firestore(t)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	clock := testenv.NewClock(time.Now())
	rows := map[string]string{}
	for name, j := range map[string]*batchv1.Job{"ok": ok, "bad": bad, "gone": gone, "live": live} {
		id := uuid.NewString()
		rows[name] = id
		must(t, writer.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: org, Provider: ledger.ProviderKubernetes, ProviderRef: refOf(j),
			Status: ledger.StatusRunning, Active: true, ObservedAt: clock.Now().Add(-time.Hour).Truncate(time.Microsecond)}))
	}
	engine := syncEngine(t, fs, store, a, clock.Now, 10*time.Minute, 2)
	run := func() map[string]ledger.Execution {
		t.Helper()
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncKubernetes,
			InitialData: json.RawMessage(`{"organization_uuid": "` + org + `", "min_age_seconds": 0}`), Trigger: workflow.TriggerLocal})
		if err != nil || out.Status != workflow.StateCompleted {
			t.Fatalf("run: %v %v %v", err, out.Err, out.Output)
		}
		got := map[string]ledger.Execution{}
		for name, id := range rows {
			r, err := store.Get(ctx, id)
			must(t, err)
			got[name] = r
		}
		return got
	}

	got := run()
	if r := got["ok"]; r.Active || r.Outcome != "succeeded" || !r.CompletedAt.Equal(end.Time) {
		t.Errorf("the completed Job's row: %+v", r)
	}
	if r := got["bad"]; !r.Active || r.Sync.PendingOutcome != "failed" {
		t.Errorf("the failing Job's row (FailureTarget only): %+v", r)
	}
	if r := got["gone"]; !r.Active || r.Sync.LastVerdict != "unknown" {
		t.Errorf("the deleted Job's row: %+v", r)
	}
	if r := got["live"]; !r.Active || r.Sync.LastVerdict != "running" {
		t.Errorf("the running Job's row: %+v", r)
	}

	// The pods finish terminating: the controller adds Failed. Past the grace, the deleted one
	// is lost.
	setStatus(bad, func(s *batchv1.JobStatus) {
		s.Conditions = append(s.Conditions, condition(batchv1.JobFailed, "BackoffLimitExceeded"))
	})
	clock.Advance(11 * time.Minute)
	got = run()
	if r := got["bad"]; r.Active || r.Outcome != "failed" || !strings.Contains(r.FailureReason, "BackoffLimitExceeded") || !r.CompletedAt.Equal(end.Time) {
		t.Errorf("the failed Job's row: %+v", r)
	}
	if r := got["gone"]; r.Active || r.Outcome != "lost" {
		t.Errorf("the deleted Job's row past the grace: %+v", r)
	}
	if r := got["live"]; !r.Active {
		t.Errorf("the running Job's row was settled: %+v", r)
	}

	// The event path on the same server and RBAC: an end event for the Job still running is a
	// hint the API server contradicts (nothing written); once the Job completes through the status
	// subresource, its event settles the row at once, whatever its age.
	sig := Signal
	sig.Provider = ledger.ProviderKubernetes
	obs := executionsync.NewObserver(executionsync.ObserverConfig{Rows: store, Signals: []logentry.Signal{sig},
		Syncers: map[string]*executionsync.Syncer{ledger.ProviderKubernetes: executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: a, Kind: executionsync.Kubernetes})}})
	observe := func(insertID string) executionsync.Observation {
		t.Helper()
		o, err := obs.Observe(ctx, logentrytest.JobEnd("lab", ns, live.Name, string(live.UID), "Completed", insertID, time.Now()), time.Now(), nil)
		must(t, err)
		return o
	}
	if o := observe("early"); len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncNotEnded {
		t.Errorf("the running Job's end event: %+v, want not_ended", o)
	}
	setStatus(live, func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded, s.CompletionTime = 0, 1, &end
		s.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), condition(batchv1.JobComplete, "CompletionsReached")}
	})
	if o := observe("done"); len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncSettled {
		t.Errorf("the completed Job's end event: %+v, want settled", o)
	}
	r, err := store.Get(ctx, rows["live"])
	must(t, err)
	if r.Active || r.Outcome != ledger.OutcomeSucceeded || r.Settlement.Evidence[executionsync.EvidencePath] != "event" || r.Settlement.Evidence[executionsync.EvidenceInsertID] != "done" {
		t.Errorf("the Job's row after its end event: %+v", r)
	}
}

func refOf(j *batchv1.Job) map[string]any {
	return map[string]any{"cluster": "lab", "namespace": j.Namespace, "job": j.Name, "uid": string(j.UID)}
}

func create(ctx context.Context, admin kubernetes.Interface, ns string) error {
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testLog sends the harness's progress (a cold build takes minutes) to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
