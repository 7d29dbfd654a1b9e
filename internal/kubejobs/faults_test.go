package kubejobs

// Executor faults (issue 10, item 1) through client-go's fake clientset: what the Kubernetes
// execution-sync workflow (runner.execution-sync-stale-kubernetes) guarantees when the API
// server fails, throttles, forgets a Job, refuses or stalls. Faults are reactors prepended to the
// fake; Code maps their API errors to the workflow's codes (TestAPIServerErrorsBecomeTheWorkflowsCodes).
// The Cloud Run equivalents are in internal/executionsync/faults_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executionsync/synccheck"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

var faultJobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

// a. 503s and timeouts on 30% of the gets: a sync whose get failed settles nothing and writes
// only the error it records (sync.last_error, sync.last_error_at, sync.attempts + 1); every row
// is settled within five runs.
func TestKubernetesTransientAPIErrorsSettleNothingOnTheErroredRowAndEveryRowWithinFiveRuns(t *testing.T) {
	t.Parallel()
	unavailable := func(string) error { return apierrors.NewServiceUnavailable("the API server is restarting") }
	timeout := func(name string) error { return apierrors.NewTimeoutError("get "+name+" timed out", 1) }
	// A row errors with Unavailable only when all three of the adapter's attempts fail (about
	// 2.7% of rows), so that case takes the most rows a run syncs (limit 200). Five runs are
	// enough for this seeded pattern; a row whose failures are not retried fails five runs
	// running with probability 0.3⁵ (0.24%), so the bound is the pattern's, not a certainty. What
	// the code guarantees — an errored row stays a candidate of the next run — is checked on
	// every run.
	tests := []struct {
		name  string
		errs  []func(string) error
		codes []codes.Code // what errs map to, in order
		rows  int
	}{
		{"503 Service Unavailable, after the adapter's three attempts", []func(string) error{unavailable}, []codes.Code{codes.Unavailable}, 200},
		{"504 Timeout, never retried", []func(string) error{timeout}, []codes.Code{codes.DeadlineExceeded}, 60},
		{"503 and 504 mixed", []func(string) error{unavailable, timeout}, []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One sync at a time, so the reactor's seeded draws fall on the same gets in every run
			// of the test: the fault pattern, and so every count below, is reproducible.
			k := faultNewKube(t, faultKubeOptions{concurrency: 1})
			runs := synccheck.NewTransientRuns(tt.codes, k.seed(tt.rows, succeededJob), k.get)
			flaky := &faultFlakyGets{rng: rand.New(rand.NewPCG(10, 2)), rate: 0.3, errs: tt.errs}
			k.cs.PrependReactor("get", "jobs", flaky.react)

			for run := 1; run <= 5 && !runs.Done(); run++ {
				k.clock.Advance(time.Minute)
				now := k.clock.Now()
				out, o, s := k.start()
				runs.Check(t, run, out, o, s, now)
			}

			// The faults happened: rows errored, with each code the case injects. 503 is retried,
			// so it shows as failed gets beyond the errored rows; a row errors with it only when
			// every attempt failed, which the 503-only case must see.
			runs.Faulted(t)
			gets, failedGets := flaky.counts()
			if gets != k.gets() {
				t.Errorf("the reactor saw %d gets, the clientset %d", gets, k.gets())
			}
			erroredRows := 0
			for _, n := range runs.ByCode {
				erroredRows += n
			}
			if retried := slices.Contains(tt.codes, codes.Unavailable); retried != (failedGets > erroredRows) {
				t.Errorf("%d failed gets for %d errored syncs: the adapter should retry 503 only", failedGets, erroredRows)
			}
			runs.Finish(t)
		})
	}
}

// b. 429 Too Many Requests is ResourceExhausted: once it has reached the run, no sync begins —
// no new get is made — for the rest of the run. The syncs already in flight (at most
// Concurrency − 1) run to their end and settle what they were told; every row not begun is
// deferred, counted, and left untouched for the next run. The error's own write on its row is
// slowed down (Firestore latency), so a stop that waited for that write would show as more gets.
func TestKubernetesTooManyRequestsBeginsNoSyncAfterItAndDefersTheRest(t *testing.T) {
	t.Parallel()
	const rows, failAt = 40, 6
	for _, concurrency := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) {
			t.Parallel()
			k := faultNewKube(t, faultKubeOptions{concurrency: concurrency, dial: []grpc.DialOption{synccheck.SlowErrorWrites(300 * time.Millisecond)}})
			seeded := k.seed(rows, succeededJob)
			throttle := &faultThrottle{failAt: failAt}
			k.cs.PrependReactor("get", "jobs", throttle.react)

			out, o, s := k.start()
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run ended %s: %v; throttling is not a failure", out.Status, out.Err)
			}
			begun, after := throttle.counts()
			if after > concurrency-1 {
				t.Errorf("%d gets after the 429, want at most %d (those already in flight)", after, concurrency-1)
			}
			if concurrency == 1 && begun != failAt {
				t.Errorf("one worker made %d gets, want %d: none after the 429", begun, failAt)
			}
			if gets := k.gets(); gets != begun {
				t.Errorf("gets = %d, want %d (one per sync begun)", gets, begun)
			}
			synccheck.Exhausted(t, seeded, k.get, o, s, begun, k.clock.Now())

			_, _, s = k.start()
			if s.Settled["succeeded"] != rows-begun+1 || s.StoppedBy != "" {
				t.Errorf("the next run: %+v, want the %d rows left settled", s, rows-begun+1)
			}
		})
	}
}

// c. A deleted Job (NotFound) is unknown, never an outcome: the row keeps its status and
// observed_at, records when the Job went missing, and is settled lost (status failed, outcome
// lost) only once it has stayed unknown for the grace — at exactly the grace, or any time after.
func TestKubernetesDeletedJobIsUnknownUntilTheGraceAndOnlyThenLost(t *testing.T) {
	t.Parallel()
	const grace = 15 * time.Minute
	tests := []struct {
		name  string
		after time.Duration
		lost  bool
	}{
		{"unknown for less than the grace: still unknown, status untouched", grace - time.Microsecond, false},
		{"unknown for exactly the grace: lost", grace, true},
		{"unknown past the grace: lost", grace + time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := faultNewKube(t, faultKubeOptions{grace: grace})
			seeded := k.seed(1, runningJob)
			id := slices.Collect(maps.Keys(seeded))[0]
			want := seeded[id]
			ctx := context.Background()
			jobName := want.ProviderRef["job"].(string)
			if err := k.cs.BatchV1().Jobs("runners").Delete(ctx, jobName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := k.cs.BatchV1().Jobs("runners").Get(ctx, jobName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the deleted Job is still there: %v", err)
			}
			gets := k.gets()
			since := k.clock.Now()

			_, _, s := k.start()
			if s.Unknown != 1 || len(s.Settled) != 0 || s.Errored != 0 {
				t.Fatalf("first run stats = %+v, want one unknown", s)
			}
			synccheck.Unknown(t, want, k.get(id), since, since, 1)

			k.clock.Advance(tt.after)
			now := k.clock.Now()
			out, _, s := k.start()
			if n := k.gets() - gets; n != 2 {
				t.Errorf("gets = %d, want 2 (one a run; NotFound is not retried)", n)
			}
			got := k.get(id)
			if !tt.lost {
				if s.Unknown != 1 || len(s.Settled) != 0 {
					t.Errorf("second run stats = %+v, want one unknown, nothing settled", s)
				}
				synccheck.Unknown(t, want, got, since, now, 2)
				return
			}
			if s.Unknown != 0 || !reflect.DeepEqual(s.Settled, map[string]int{ledger.OutcomeLost: 1}) {
				t.Errorf("second run stats = %+v, want one settled lost and nothing else", s)
			}
			synccheck.Lost(t, want, got, since, now, out.RunUUID, grace)
			if ev := got.Settlement.Evidence; ev["error"] != "not_found" || ev["job"] != jobName || ev["source"] != "kubernetes" {
				t.Errorf("lost evidence = %v, want the API server's NotFound for %s", ev, jobName)
			}
		})
	}
}

// d. 403 Forbidden (and 401 Unauthorized): nothing settled, gets stop, the run fails and its
// record says why.
func TestKubernetesForbiddenSettlesNothingAndTheRunRecordSaysWhy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    func(name string) error
		code   codes.Code
		reason string
	}{
		{"403 Forbidden", func(name string) error {
			return apierrors.NewForbidden(faultJobsResource, name, errors.New(`User "stalesweep" cannot get resource "jobs"`))
		}, codes.PermissionDenied, "permission_denied"},
		{"401 Unauthorized", func(string) error { return apierrors.NewUnauthorized("the token has expired") }, codes.Unauthenticated, "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const rows, concurrency = 12, 4
			k := faultNewKube(t, faultKubeOptions{concurrency: concurrency})
			seeded := k.seed(rows, succeededJob)
			k.cs.PrependReactor("get", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err(a.(k8stesting.GetAction).GetName())
			})

			out, o, s := k.start()
			synccheck.Refused(t, k.runs, seeded, k.get, out, o, s, tt.code, tt.reason, concurrency, k.clock.Now())
			if gets := k.gets(); gets != s.Errored {
				t.Errorf("gets = %d, want %d: one per errored row, none after the stop", gets, s.Errored)
			}
		})
	}
}

// e. A get that the API server holds past the adapter's per-call timeout is cut at the timeout:
// the row is errored with DeadlineExceeded in the run's stats, and nothing is settled. A get
// answered within its timeout settles as usual, so the timeout is what makes the difference.
func TestKubernetesGetsSlowerThanTheirTimeoutAreErroredDeadlineExceededAndSettleNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		hold    bool
	}{
		{"held until the per-call timeout ends it", 50 * time.Millisecond, true},
		{"answered within the per-call timeout", 10 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const rows = 8
			clusters := &faultCtxClusters{}
			k := faultNewKube(t, faultKubeOptions{concurrency: 4, adapter: Config{CallTimeout: tt.timeout},
				clusters: func(cs *fake.Clientset) Clusters { clusters.cs = cs; return clusters }})
			seeded := k.seed(rows, succeededJob)
			var held sync.Map // job → the error its get ended with
			k.cs.PrependReactor("get", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if !tt.hold {
					return false, nil, nil
				}
				name := a.(k8stesting.GetAction).GetName()
				ctx, ok := clusters.ctxOf(a)
				if !ok {
					return true, nil, fmt.Errorf("get %s did not come through faultCtxClusters", name)
				}
				<-ctx.Done() // the API server answers only after the client gave up
				err := &url.Error{Op: "Get", URL: "https://eu.example/apis/batch/v1/namespaces/runners/jobs/" + name, Err: ctx.Err()}
				held.Store(name, err)
				return true, nil, err
			})

			out, o, s := k.start()
			if out.Status != workflow.StateCompleted {
				t.Fatalf("run ended %s: %v", out.Status, out.Err)
			}
			if gets := k.gets(); gets != rows {
				t.Errorf("gets = %d, want %d (DeadlineExceeded is not retried)", gets, rows)
			}
			if s.Deferred != 0 || s.OutOfBudget {
				t.Errorf("stats = %+v: the run's budget is not what cut the gets", s)
			}
			if !tt.hold {
				if s.Settled["succeeded"] != rows || s.Errored != 0 {
					t.Errorf("stats = %+v, want every row settled", s)
				}
				return
			}
			n := 0
			held.Range(func(_, err any) bool {
				if n++; !errors.Is(err.(error), context.DeadlineExceeded) {
					t.Errorf("a held get ended with %v, want its deadline", err)
				}
				return true
			})
			if n != rows {
				t.Errorf("%d gets were held to their deadline, want %d", n, rows)
			}
			synccheck.AllTimedOut(t, seeded, k.get, o, s, k.clock.Now())
		})
	}
}

// faultKube is one test's world: its own Firestore project, a fake clientset as cluster "eu",
// a clock, and the Kubernetes execution-sync workflow wired as the app wires it.
type faultKube struct {
	t      *testing.T
	cs     *fake.Clientset
	store  *ledger.ExecutionStore
	runs   *ledger.RunStore
	clock  *testenv.Clock
	engine *workflow.Engine
	org    string
	jobs   int
}

type faultKubeOptions struct {
	concurrency int
	grace       time.Duration
	adapter     Config
	// clusters, when set, serves the clientset to the adapter instead of a Set.
	clusters func(*fake.Clientset) Clusters
	// dial adds options to the Firestore connection (a fault interceptor).
	dial []grpc.DialOption
}

func faultNewKube(t *testing.T, o faultKubeOptions) *faultKube {
	t.Helper()
	k := &faultKube{t: t, cs: fake.NewClientset(), clock: testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)), org: uuid.NewString()}
	fs := testenv.Firestore(t, o.dial...)
	testenv.Enable(t, fs, k.org)
	k.store = ledger.NewExecutionStore(fs, ledger.TxConfig{})
	k.runs = ledger.NewRunStore(fs)
	var clusters Clusters
	if o.clusters != nil {
		clusters = o.clusters(k.cs)
	} else {
		set := NewSet(nil, time.Second)
		set.Add("eu", k.cs.BatchV1())
		clusters = set
	}
	if o.adapter.Backoff == 0 {
		o.adapter.Backoff = time.Millisecond
	}
	a := New(clusters, o.adapter)
	cfg := executionsync.Config{Provider: ledger.ProviderKubernetes, Concurrency: o.concurrency, LostGrace: o.grace}.WithDefaults()
	syncer := executionsync.NewSyncer(k.store, a, contract.ExecutionSyncKubernetes, ledger.ProviderKubernetes, k.clock.Now, cfg.LostGrace, logging.Discard())
	wf, err := executionsync.New(k.store, a, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, k.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	k.engine = workflow.NewEngine(workflow.Options{Runs: k.runs, Now: k.clock.Now, Log: logging.Discard()},
		wf.Definition(contract.ExecutionSyncKubernetes, executionsync.EnvelopeKubernetes))
	return k
}

// seed creates n Jobs made by mk on the cluster, each with a stale active row naming it, and
// returns the rows as read back.
func (k *faultKube) seed(n int, mk func(name string) *batchv1.Job) map[string]ledger.Execution {
	k.t.Helper()
	ctx := context.Background()
	out := make(map[string]ledger.Execution, n)
	for range n {
		k.jobs++
		j, err := k.cs.BatchV1().Jobs("runners").Create(ctx, mk(fmt.Sprintf("build-%d", k.jobs)), metaCreate)
		if err != nil {
			k.t.Fatal(err)
		}
		id := uuid.NewString()
		if err := k.store.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: k.org, RunnerGroupUUID: "group-1",
			Provider: ledger.ProviderKubernetes, ProviderRef: ref(j), Status: ledger.StatusRunning, Active: true,
			ObservedAt: k.clock.Now().Add(-10 * time.Minute)}); err != nil {
			k.t.Fatal(err)
		}
		out[id] = k.get(id)
	}
	k.cs.ClearActions()
	return out
}

func (k *faultKube) get(id string) ledger.Execution {
	k.t.Helper()
	r, err := k.store.Get(context.Background(), id)
	if err != nil {
		k.t.Fatal(err)
	}
	return r
}

// start runs the workflow over the organization (limit 200) and decodes its output and stats.
func (k *faultKube) start() (workflow.Outcome, executionsync.Output, executionsync.Stats) {
	k.t.Helper()
	out, err := k.engine.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncKubernetes,
		InitialData: json.RawMessage(`{"organization_uuid": "` + k.org + `", "limit": 200}`), Trigger: workflow.TriggerLocal, Actor: "test"})
	if err != nil {
		k.t.Fatalf("start: %v", err)
	}
	var o executionsync.Output
	var s executionsync.Stats
	testenv.Decode(k.t, out.Output, &o)
	testenv.Decode(k.t, out.Stats, &s)
	if o.StartedCount+o.SkippedMissingMetadataCount+o.FailedStartCount != o.CandidateCount {
		k.t.Errorf("counts do not add up: %+v", o)
	}
	return out, o, s
}

// gets counts the get actions on jobs the clientset has seen since seeding.
func (k *faultKube) gets() int {
	n := 0
	for _, a := range k.cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

// faultFlakyGets fails a seeded random rate of gets with one of errs (picked by the same
// source); the rest go on to the clientset's objects.
type faultFlakyGets struct {
	rate float64
	errs []func(name string) error

	mu     sync.Mutex
	rng    *rand.Rand
	gets   int
	failed int
}

func (f *faultFlakyGets) react(a k8stesting.Action) (bool, runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.rng.Float64() >= f.rate {
		return false, nil, nil
	}
	f.failed++
	return true, nil, f.errs[f.rng.IntN(len(f.errs))](a.(k8stesting.GetAction).GetName())
}

func (f *faultFlakyGets) counts() (gets, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.failed
}

// faultThrottle answers the failAt-th get with 429 Too Many Requests, and counts the gets and
// those that came after the 429 had been answered.
type faultThrottle struct {
	failAt int

	mu        sync.Mutex
	begun     int
	after     int
	throttled bool
}

func (f *faultThrottle) react(k8stesting.Action) (bool, runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begun++
	if f.throttled {
		f.after++
	}
	if f.begun == f.failAt {
		f.throttled = true
		return true, nil, apierrors.NewTooManyRequests("the API server is throttling this client", 1)
	}
	return false, nil, nil
}

func (f *faultThrottle) counts() (begun, after int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begun, f.after
}

// faultCtxClusters serves cluster "eu" from a fake clientset and lets a reactor find the context
// of the get it answers. The fake clientset hands reactors only the action; the real client
// carries the context into the request and gives up on it when the context ends, returning an
// error that wraps the context's.
type faultCtxClusters struct {
	cs   *fake.Clientset
	ctxs sync.Map // "namespace/job" → the context of the get in progress
}

func (c *faultCtxClusters) Jobs(cluster, namespace string) (JobGetter, error) {
	if cluster != "eu" {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCluster, cluster)
	}
	return faultCtxJobs{c: c, namespace: namespace}, nil
}

// ctxOf returns the context of the get a is, if it came through Jobs.
func (c *faultCtxClusters) ctxOf(a k8stesting.Action) (context.Context, bool) {
	ctx, ok := c.ctxs.Load(a.GetNamespace() + "/" + a.(k8stesting.GetAction).GetName())
	if !ok {
		return nil, false
	}
	return ctx.(context.Context), true
}

type faultCtxJobs struct {
	c         *faultCtxClusters
	namespace string
}

func (j faultCtxJobs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*batchv1.Job, error) {
	key := j.namespace + "/" + name
	j.c.ctxs.Store(key, ctx)
	defer j.c.ctxs.Delete(key)
	return j.c.cs.BatchV1().Jobs(j.namespace).Get(ctx, name, opts)
}
