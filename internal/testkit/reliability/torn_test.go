package reliability_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
)

// The torn-row check is shown to bite: rows as each ledger transaction leaves them are judged
// complete, and the same rows with any one part of the write missing, wrong or extra are judged
// torn. The legal states are built by hand, field by field, not by the change the check expects.
func TestTheTornRowCheckReportsEveryDoctoredRow(t *testing.T) {
	t.Parallel()
	now := epoch
	observed := now.Add(-execStaleFor)
	finished := observed.Add(-time.Minute)
	run := "run-1"

	// A Cloud Run execution that failed, settled.
	ex := ledger.ExecutionsCollection + "/x"
	exBefore := state{}
	flatten(exBefore, ex, executionDoc("org", ledger.ProviderCloudRun, map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"}, observed))
	exAfter := with(exBefore, map[string]any{
		ex + "#status": "failed", ex + "#active": false, ex + "#outcome": "failed", ex + "#completed_at": finished,
		ex + "#failure_reason": "NON_ZERO_EXIT_CODE: exit 1", ex + "#settlement.at": now, ex + "#settlement.workflow_run_uuid": run,
		ex + "#settlement.reason": executionsync.ReasonExecutorTerminal, ex + "#settlement.evidence.row_observed_at": observed,
		ex + "#settlement.evidence.verdict": "failed", ex + "#settlement.evidence.etag": `"7"`, ex + "#settlement.evidence.conditions": []any{"Completed"},
		ex + "#settlement.evidence.log_uri": "https://logs", ex + "#sync.last_synced_at": now, ex + "#sync.last_verdict": "failed", ex + "#sync.attempts": int64(1),
		ex + "#sync.target": "cloud_run:projects/p/locations/l",
	})
	exSettle := settleExecution("x", "failed", now, finished, observed, "etag", "conditions", "log_uri")(run)

	// An idle background app invocation that held its interlock, abandoned.
	er, lock := ledger.ExtensionRunsCollection+"/r", ledger.ExtensionInterlocksCollection+"/t:e"
	moved := now.Add(-idleFor)
	erBefore := state{}
	flatten(erBefore, er, map[string]any{"tenant_id": "t", "extension_id": "e", "job_name": "j", "background": true, "status": "running", "started_at": moved, "last_moved_at": moved})
	flatten(erBefore, lock, map[string]any{"run_id": "r", "acquired_at": moved})
	erAfter := without(with(erBefore, map[string]any{
		er + "#status": "failed", er + "#outcome": "abandoned", er + "#finished_at": now, er + "#settlement.at": now,
		er + "#settlement.workflow_run_uuid": run, er + "#settlement.reason": runssweep.ReasonIdle,
		er + "#settlement.evidence.last_moved_at": moved, er + "#settlement.evidence.older_than_ms": int64(60000),
		er + "#settlement.evidence.deadline": now.Add(-time.Minute), er + "#settlement.evidence.idle_ms": int64(600000),
		er + "#settlement.evidence." + ledger.EvidenceInterlockReleased: true,
	}), lock+"#")
	erAbandon := &change{set: map[string]any{
		er + "#status": ledger.ExtensionFailed, er + "#outcome": ledger.OutcomeAbandoned, er + "#finished_at": now, er + "#settlement.at": now,
		er + "#settlement.workflow_run_uuid": run, er + "#settlement.reason": runssweep.ReasonIdle,
		er + "#settlement.evidence.last_moved_at": moved, er + "#settlement.evidence.older_than_ms": 60000,
		er + "#settlement.evidence.deadline": runssweep.Deadline(now, 60000), er + "#settlement.evidence.idle_ms": now.Sub(moved).Milliseconds(),
		er + "#settlement.evidence." + ledger.EvidenceInterlockReleased: true,
	}, drop: []string{lock + "#"}}

	// A silent task, reclaimed: the chains as ledger.TaskStore.ReclaimTask appends them.
	task := ledger.TaskQueuesCollection + "/q/" + ledger.TasksCollection + "/k"
	seededDocs := map[string]map[string]any{}
	heads, _ := seedTask(seededDocs, task, "k", "w", moved)
	tkBefore := state{}
	for p, d := range seededDocs {
		flatten(tkBefore, p, d)
	}
	hbPayload := map[string]any{"preempt": true, "reclaimer": "me"}
	stPayload := map[string]any{"status": "new", "reclaimed": true, "reclaimer": "me", "reclaim_count": int64(1)}
	hb := entryID("k", ledger.ChainHeartbeats, ledger.Entry{CreatedAt: now, Prev: heads.heartbeat, Payload: hbPayload})
	st := entryID("k", ledger.ChainStatuses, ledger.Entry{CreatedAt: now, Prev: heads.status, Payload: stPayload})
	tkAfter := without(with(tkBefore, map[string]any{
		task + "#status": "new", task + "#status_tip": st, task + "#heartbeat_tip": hb, task + "#reclaim_count": int64(1), task + "#last_activity_at": now,
	}), task+"#worker_id")
	tkEntries := state{}
	flatten(tkEntries, task+"/heartbeats/"+hb, map[string]any{"created_at": now, "prev": heads.heartbeat, "payload": hbPayload})
	flatten(tkEntries, task+"/statuses/"+st, map[string]any{"created_at": now, "prev": heads.status, "payload": stPayload})
	tkAfter = with(tkAfter, tkEntries)
	tkReclaim := reclaimTask(task, "k", heads, now, now, "me", 1)

	// A lease whose holder cannot be found, with a stale heartbeat, abandoned.
	ls := ledger.WorkspaceLeasesCollection + "/l"
	lsBefore := state{}
	flatten(lsBefore, ls, map[string]any{"organization_uuid": "o", "runner_group_uuid": "g", "workspace_id": "ws", "holder_runner_instance_uuid": "gone",
		"status": "active", "acquired_at": moved, "heartbeat_at": moved})
	lsAfter := with(lsBefore, map[string]any{
		ls + "#status": "abandoned", ls + "#released_at": now, ls + "#settlement.at": now, ls + "#settlement.workflow_run_uuid": run,
		ls + "#settlement.reason": leasesettle.ReasonHolderUnresolvableStale, ls + "#settlement.evidence.holder_runner_instance_uuid": "gone",
		ls + "#settlement.evidence.holder_resolved": false, ls + "#settlement.evidence.holder_status": "", ls + "#settlement.evidence.heartbeat_at": moved,
		ls + "#settlement.evidence.heartbeat_age_seconds": int64(600), ls + "#settlement.evidence.heartbeat_timeout_seconds": int64(300),
	})
	lsAbandon := &change{set: map[string]any{
		ls + "#status": ledger.LeaseAbandoned, ls + "#released_at": now, ls + "#settlement.at": now, ls + "#settlement.workflow_run_uuid": run,
		ls + "#settlement.reason": leasesettle.ReasonHolderUnresolvableStale, ls + "#settlement.evidence.holder_runner_instance_uuid": "gone",
		ls + "#settlement.evidence.holder_resolved": false, ls + "#settlement.evidence.holder_status": "", ls + "#settlement.evidence.heartbeat_at": moved,
		ls + "#settlement.evidence.heartbeat_age_seconds": int64(600), ls + "#settlement.evidence.heartbeat_timeout_seconds": int64(300),
	}}

	for _, c := range []struct {
		name          string
		before, after state
		change        *change
		want          string
	}{
		{"execution left alone", exBefore, exBefore, exSettle, untouched},
		{"execution settled", exBefore, exAfter, exSettle, changed},
		{"execution settled without a reason", exBefore, without(exAfter, ex+"#settlement.reason"), exSettle, torn},
		{"execution settled but still active", exBefore, with(exAfter, map[string]any{ex + "#active": true}), exSettle, torn},
		{"execution with a status and no outcome", exBefore, without(exAfter, ex+"#outcome"), exSettle, torn},
		{"execution failed without a failure_reason", exBefore, without(exAfter, ex+"#failure_reason"), exSettle, torn},
		{"execution settled without the executor's evidence", exBefore, without(exAfter, ex+"#settlement.evidence.etag", ex+"#settlement.evidence.conditions", ex+"#settlement.evidence.log_uri"), exSettle, torn},
		{"execution settled by another run", exBefore, with(exAfter, map[string]any{ex + "#settlement.workflow_run_uuid": "run-2"}), exSettle, torn},
		{"execution settled with an executor error recorded too", exBefore, with(exAfter, map[string]any{ex + "#sync.last_error": "Unavailable"}), exSettle, torn},
		{"execution refreshed where it must be settled", exBefore, with(exBefore, map[string]any{ex + "#observed_at": now, ex + "#sync.last_synced_at": now, ex + "#sync.last_verdict": "running", ex + "#sync.attempts": int64(1)}), exSettle, torn},
		{"invocation abandoned, its interlock released", erBefore, erAfter, erAbandon, changed},
		{"invocation abandoned, its interlock left held", erBefore, with(erAfter, map[string]any{lock + "#run_id": "r", lock + "#acquired_at": moved}), erAbandon, torn},
		{"interlock released, invocation still running", erBefore, without(erBefore, lock+"#"), erAbandon, torn},
		{"task reclaimed", tkBefore, tkAfter, tkReclaim, changed},
		{"task requeued without its preempt heartbeat", tkBefore, without(tkAfter, task+"/heartbeats/"+hb+"#"), tkReclaim, torn},
		{"preempt heartbeat chained on another head", tkBefore, with(tkAfter, map[string]any{task + "/heartbeats/" + hb + "#prev": "elsewhere"}), tkReclaim, torn},
		{"task reclaimed with a stray status entry", tkBefore, with(tkAfter, map[string]any{task + "/statuses/stray#prev": st}), tkReclaim, torn},
		{"task requeued but still naming its worker", tkBefore, with(tkAfter, map[string]any{task + "#worker_id": "w"}), tkReclaim, torn},
		{"task reclaim entries written, task untouched", tkBefore, with(tkBefore, tkEntries), tkReclaim, torn},
		{"lease abandoned", lsBefore, lsAfter, lsAbandon, changed},
		{"lease abandoned without released_at", lsBefore, without(lsAfter, ls+"#released_at"), lsAbandon, torn},
		{"a live lease that must stay as seeded, heartbeat moved", lsBefore, with(lsBefore, map[string]any{ls + "#heartbeat_at": now}), nil, torn},
	} {
		got, diffs := judge(c.before, c.after, c.change)
		if got != c.want {
			t.Errorf("%s: judged %s, want %s (%v)", c.name, got, c.want, diffs)
		}
		if got == torn && len(diffs) == 0 {
			t.Errorf("%s: torn, with no difference named", c.name)
		}
	}
}

// with returns s with keys set.
func with(s state, set map[string]any) state {
	out := maps.Clone(s)
	maps.Copy(out, set)
	return out
}

// without returns s without keys, or without whole documents ("doc#").
func without(s state, keys ...string) state {
	out := maps.Clone(s)
	for _, k := range keys {
		for have := range out {
			if have == k || (strings.HasSuffix(k, "#") && strings.HasPrefix(have, k)) {
				delete(out, have)
			}
		}
	}
	return out
}
