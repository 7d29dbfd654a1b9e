package reliability_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/google/uuid"
	"google.golang.org/api/option"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// The execution-sync rigs seed, per trial, one organization's rows: executions that ended
// (succeeded, failed, cancelled — settled), one still running (refreshed), one the executor does
// not know (unknown_since recorded, well within the grace) and one observed too recently to be
// stale (left alone).
//
// The legal states of a row, from ledger.ExecutionStore.Apply and executionsync's decide: Apply
// writes, in one transaction, exactly the updates of the one ExecutionChange decide returns for
// the row as re-read and the executor's answer. So a row is untouched (no sync reached its
// transaction, or its transaction was cut and committed nothing, or decide said ChangeNone), or
// carries exactly one complete change of the kind its executor's answer calls for: ChangeSettle
// for an execution that ended, ChangeRefresh (observed_at and sync.*) for one still running,
// ChangeUnknown (sync.* and unknown_since) for one the executor does not know. ChangeError is not
// legal here: a call cut by the run's context is deferred, not recorded as the executor's error
// (the syncer checks the context first), and the fakes inject no faults.

const execStaleFor = 10 * time.Minute

// executionRig wires the execution-sync workflow of one provider around exec.
func executionRig(t *testing.T, r *rig, kind executionsync.Kind, exec executor.Executor) {
	provider := kind.Provider
	t.Helper()
	store := ledger.NewExecutionStore(r.fs, ledger.TxConfig{}, ledger.Retention{})
	cfg := executionsync.Config{Provider: provider, Concurrency: 4}.WithDefaults()
	r.syncer = executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: exec, Kind: kind, Now: r.clock.Now, LostGrace: cfg.LostGrace})
	wf, err := executionsync.New(store, exec, &executionsync.Inline{Syncer: r.syncer, Concurrency: cfg.Concurrency}, cfg, r.clock.Now, nil)
	if err != nil {
		t.Fatalf("%v", err)
	}
	r.use(wf.Definition(kind))
}

func cloudRunRig(t *testing.T) *rig {
	r := newRig(t, contract.ExecutionSyncCloudRun, "settlement")
	fake, err := cloudrunfake.NewServer(cloudrunfake.WithClock(r.clock.Now))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(fake.Close)
	client, err := cloudrun.Dial(context.Background(), fake.Addr, option.WithGRPCDialOption(r.trip.unaryOption()))
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { client.Close() })
	executionRig(t, r, executionsync.CloudRun, cloudrun.New(client, cloudrun.Config{Backoff: time.Millisecond}))
	r.warm = func(t *testing.T) {
		warmFirestore(t, r)
		_, _ = client.GetExecution(context.Background(), &runpb.GetExecutionRequest{Name: cloudrunfake.ExecutionName("p", "l", "j", "warm")})
	}
	r.seed = func(t reporter, trial int) trialRows {
		x := newExecTrial(r.clock.Now(), ledger.ProviderCloudRun)
		now, old, finished := x.now, x.old, x.finished
		add := func(name string, exec func(string, time.Time) *runpb.Execution, observed time.Time, ch rowChange, settles bool) {
			id := uuid.NewString()
			ename := cloudrunfake.ExecutionName("p", "europe-west1", "job", "exec-"+id[:8])
			if exec != nil {
				if err := fake.SetExecution(exec(ename, finished)); err != nil {
					t.Fatalf("%v", err)
				}
			}
			x.add(name, id, map[string]any{cloudrun.RefKey: ename}, observed, ch, settles)
		}
		settle := func(v string) rowChange { return x.settle(v, "etag", "conditions", "log_uri") }
		add("succeeded", cloudrunfake.Succeeded, old, settle(ledger.StatusSucceeded), true)
		add("failed", func(n string, at time.Time) *runpb.Execution {
			return cloudrunfake.Failed(n, at, runpb.Condition_NON_ZERO_EXIT_CODE)
		}, old, settle(ledger.StatusFailed), true)
		add("cancelled", cloudrunfake.Cancelled, old, settle(ledger.StatusCancelled), true)
		add("running", cloudrunfake.Running, old, refreshExecution(now), false)
		add("unknown", nil, old, unknownExecution(now), false)
		add("fresh", cloudrunfake.Succeeded, now.Add(-10*time.Second), never, false)
		return x.put(t, r.fs)
	}
	return r
}

func kubernetesRig(t *testing.T) *rig {
	r := newRig(t, contract.ExecutionSyncKubernetes, "settlement")
	cs := fake.NewClientset()
	set := kubejobs.NewSet(kubejobs.SetConfig{Client: kubejobs.ClientConfig{Timeout: time.Second}, Ready: map[string]batchclient.BatchV1Interface{"eu": cs.BatchV1()}})
	// As internal/app builds it, over the exported Set, with every API call counted.
	exec := kubejobs.New(trippedClusters{Clusters: set, trip: r.trip}, kubejobs.Config{Backoff: time.Millisecond})
	executionRig(t, r, executionsync.Kubernetes, exec)
	r.warm = func(t *testing.T) { warmFirestore(t, r) }
	r.seed = func(t reporter, trial int) trialRows {
		ctx := context.Background()
		x := newExecTrial(r.clock.Now(), ledger.ProviderKubernetes)
		now, old, finished := x.now, x.old, x.finished
		add := func(name string, mod func(*batchv1.Job), create bool, observed time.Time, ch rowChange, settles bool) {
			id := uuid.NewString()
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "build-" + id[:13], Namespace: "runners", UID: types.UID("uid-" + id)},
				Status: batchv1.JobStatus{StartTime: &metav1.Time{Time: old.Add(-time.Hour)}}}
			if mod != nil {
				mod(j)
			}
			if create {
				if _, err := cs.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
					t.Fatalf("%v", err)
				}
			}
			x.add(name, id, map[string]any{"cluster": "eu", "namespace": j.Namespace, "job": j.Name, "uid": string(j.UID)}, observed, ch, settles)
		}
		cond := func(typ batchv1.JobConditionType, reason string) batchv1.JobCondition {
			return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Time{Time: finished}}
		}
		settle := func(v string) rowChange { return x.settle(v, "conditions", "uid", "cluster") }
		add("succeeded", func(j *batchv1.Job) {
			j.Status.Succeeded, j.Status.CompletionTime = 1, &metav1.Time{Time: finished}
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached")}
		}, true, old, settle(ledger.StatusSucceeded), true)
		add("failed", func(j *batchv1.Job) {
			j.Status.Failed = 2
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded"), cond(batchv1.JobFailed, "BackoffLimitExceeded")}
		}, true, old, settle(ledger.StatusFailed), true)
		add("running", func(j *batchv1.Job) { j.Status.Active = 1 }, true, old, refreshExecution(now), false)
		add("deleted", nil, false, old, unknownExecution(now), false)
		add("fresh", func(j *batchv1.Job) { j.Status.Active = 1 }, true, now.Add(-10*time.Second), never, false)
		return x.put(t, r.fs)
	}
	return r
}

// execTrial is one trial's rows of an execution sync, as both providers' rigs seed them: an
// organization with sweeps enabled, rows of one provider in it, and the times they are judged by.
type execTrial struct {
	org, provider      string
	now, old, finished time.Time // the trial's start; stale rows' observed_at; their executions' end
	rows               []seededRow
	docs               map[string]map[string]any
}

func newExecTrial(now time.Time, provider string) *execTrial {
	org := uuid.NewString()
	old := now.Add(-execStaleFor)
	return &execTrial{org: org, provider: provider, now: now, old: old, finished: old.Add(-time.Minute),
		docs: map[string]map[string]any{ledger.OrganizationsCollection + "/" + org: {"sweeps_enabled": true}}}
}

// add seeds the row id, of the execution ref names, observed at observed.
func (x *execTrial) add(name, id string, ref map[string]any, observed time.Time, ch rowChange, settles bool) {
	x.docs[ledger.ExecutionsCollection+"/"+id] = executionDoc(x.org, x.provider, ref, observed)
	x.rows = append(x.rows, executionRow(name, id, observed, ch, settles))
}

// settle is the change of a row the trial's run settles as verdict, with the provider's evidence.
func (x *execTrial) settle(verdict string, evidence ...string) rowChange {
	return func(id string, observed time.Time) (func(string) *change, func(string) *change) {
		return settleExecution(id, verdict, x.now, x.finished, observed, evidence...), nil
	}
}

// put writes the trial's documents and returns its rows, with the input that scopes a run to it.
func (x *execTrial) put(t reporter, fs *firestore.Client) trialRows {
	putDocs(t, fs, x.docs)
	return trialRows{input: map[string]any{"organization_uuid": x.org}, rows: x.rows}
}

func warmFirestore(t *testing.T, r *rig) {
	t.Helper()
	if _, err := r.fs.Collection(firestoreconn.ClockCollection).Doc("warm").Get(context.Background()); err != nil && !isNotFound(err) {
		t.Fatalf("%v", err)
	}
}

func executionDoc(org, provider string, ref map[string]any, observed time.Time) map[string]any {
	return map[string]any{
		"organization_uuid": org, "runner_group_uuid": "group-1", "provider": provider, "provider_ref": ref,
		"status": ledger.StatusRunning, "active": true, "observed_at": observed,
	}
}

// rowChange gives, for a row's id and observed_at, the change a run makes to it and the change a
// later run makes again once the first has (nil for none).
type rowChange func(id string, observed time.Time) (first, again func(string) *change)

func executionRow(name, id string, observed time.Time, ch rowChange, settles bool) seededRow {
	doc := ledger.ExecutionsCollection + "/" + id
	first, again := ch(id, observed)
	return seededRow{name: name, unit: unit{docs: []string{doc}}, doc: doc, change: first, again: again, settles: settles}
}

// never is a row no run may change.
func never(string, time.Time) (func(string) *change, func(string) *change) { return nil, nil }

// settleExecution is ledger.ExecutionChange.updates of a ChangeSettle that decide returns for an
// execution the executor reports over: status, active, outcome, completed_at, failure_reason
// (unless it succeeded), settlement with the executor's evidence, and the sync bookkeeping.
func settleExecution(id, verdict string, now, finished, observed time.Time, evidence ...string) func(string) *change {
	d := ledger.ExecutionsCollection + "/" + id + "#"
	return func(runUUID string) *change {
		c := &change{set: map[string]any{
			d + "status": verdict, d + "active": false, d + "outcome": verdict, d + "completed_at": finished,
			d + "settlement.at": now, d + "settlement.workflow_run_uuid": runUUID, d + "settlement.reason": executionsync.ReasonExecutorTerminal,
			d + "settlement.evidence.row_observed_at": observed, d + "settlement.evidence.verdict": verdict,
			d + "sync.last_synced_at": now, d + "sync.last_verdict": verdict, d + "sync.attempts": 1,
			d + "sync.target": matcher(nonEmptyString),
		}, free: map[string]func(map[string]any) string{d + "settlement.evidence.": evidenceWith(evidence...)}}
		if verdict != ledger.StatusSucceeded {
			c.set[d+"failure_reason"] = matcher(nonEmptyString)
		}
		return c
	}
}

// refreshExecution is the change of a row whose execution is still running: observed_at, the
// sync bookkeeping and the executor's snapshot, nothing else. The row is then fresh: no later run
// of the trial syncs it.
func refreshExecution(now time.Time) rowChange {
	return func(id string, _ time.Time) (func(string) *change, func(string) *change) {
		d := ledger.ExecutionsCollection + "/" + id + "#"
		return func(string) *change {
			return &change{set: map[string]any{
				d + "observed_at": now, d + "sync.last_synced_at": now, d + "sync.last_verdict": "running", d + "sync.attempts": 1,
				d + "sync.last_snapshot.seen_at": now, d + "sync.last_snapshot.source": matcher(nonEmptyString),
				d + "sync.target": matcher(nonEmptyString),
			}, free: map[string]func(map[string]any) string{d + "sync.last_snapshot.": evidenceWith()}}
		}, nil
	}
}

// unknownExecution is the change of a row the executor does not know, within the grace: the
// sync bookkeeping and unknown_since. The row stays stale, so a later run syncs it again, but
// learns nothing new and writes nothing until the guard's keep-alive falls due (internal/executionsync).
func unknownExecution(now time.Time) rowChange {
	return func(id string, _ time.Time) (func(string) *change, func(string) *change) {
		d := ledger.ExecutionsCollection + "/" + id + "#"
		attempt := func(n int) func(string) *change {
			return func(string) *change {
				return &change{set: map[string]any{
					d + "sync.last_synced_at": now, d + "sync.last_verdict": "unknown", d + "sync.unknown_since": now, d + "sync.attempts": n,
					d + "sync.target": matcher(nonEmptyString),
				}}
			}
		}
		return attempt(1), nil
	}
}
