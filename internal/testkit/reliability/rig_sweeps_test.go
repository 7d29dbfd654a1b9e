package reliability_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
)

// The rigs of the three workflows that settle on age: each trial seeds a handful of rows, a
// few of them stale (well under the storm guard's ten) and some live, which must stay as they
// are.

const (
	idleFor   = 10 * time.Minute
	liveSince = 10 * time.Second
)

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// runsSweepRig: per trial, a tenant with an idle background run holding its interlock (abandoned,
// interlock deleted), an idle foreground run (abandoned), an idle background run whose interlock
// another, live run holds (abandoned, interlock kept), and two live runs (kept).
func runsSweepRig(t *testing.T) *rig { return runsSweepRigWith(t, nil) }

// runsSweepRigWith is runsSweepRig with the sweep's store wrapped (nil: as it is).
func runsSweepRigWith(t *testing.T, wrap func(*rig, *ledger.ExtensionRunStore) runssweep.Store) *rig {
	r := newRig(t, contract.ExtensionRunsSweep, "settlement")
	store := ledger.NewExtensionRunStore(r.fs, ledger.TxConfig{})
	var sweepStore runssweep.Store = store
	if wrap != nil {
		sweepStore = wrap(r, store)
	}
	r.use(runssweep.New(sweepStore, runssweep.Config{Bounds: agesweep.Bounds{Concurrency: 4}}, ledgertest.LocalClock(r.clock.Now)).Definition())
	r.warm = func(t *testing.T) { warmFirestore(t, r) }
	const olderThanMs = 60000
	r.seed = func(t reporter, trial int) trialRows {
		tenant := fmt.Sprintf("tenant-%d-%s", trial, uuid.NewString()[:8])
		now := r.clock.Now()
		deadline := runssweep.Deadline(now, olderThanMs)
		docs := map[string]map[string]any{}
		var rows []seededRow
		add := func(name, ext string, background bool, moved time.Time, interlockHolder string, abandon bool) string {
			id := "run-" + uuid.NewString()
			doc := ledger.ExtensionRunsCollection + "/" + id
			docs[doc] = map[string]any{
				"tenant_id": tenant, "extension_id": ext, "job_name": "job-" + ext, "background": background,
				"status": ledger.ExtensionRunning, "started_at": moved.Add(-time.Minute), "last_moved_at": moved,
			}
			u := unit{docs: []string{doc}}
			lock := ledger.ExtensionInterlocksCollection + "/" + ledger.InterlockID(tenant, ext)
			if interlockHolder == "self" {
				interlockHolder = id
			}
			if interlockHolder != "" {
				if _, taken := docs[lock]; !taken {
					docs[lock] = map[string]any{"run_id": interlockHolder, "acquired_at": moved.Add(-time.Minute)}
				}
				u.docs = append(u.docs, lock)
			}
			row := seededRow{name: name, unit: u, doc: doc, settles: abandon}
			if abandon {
				d := doc + "#"
				releases := interlockHolder == id
				row.change = func(runUUID string) *change {
					c := &change{set: map[string]any{
						d + "status": ledger.ExtensionFailed, d + "outcome": ledger.OutcomeAbandoned, d + "finished_at": now,
						d + "settlement.at": now, d + "settlement.workflow_run_uuid": runUUID, d + "settlement.reason": runssweep.ReasonIdle,
						d + "settlement.evidence.last_moved_at": moved, d + "settlement.evidence.older_than_ms": olderThanMs,
						d + "settlement.evidence.deadline": deadline, d + "settlement.evidence.idle_ms": now.Sub(moved).Milliseconds(),
					}}
					if background {
						c.set[d+"settlement.evidence."+ledger.EvidenceInterlockReleased] = releases
					}
					if background && !releases && interlockHolder != "" {
						c.set[d+"settlement.evidence."+ledger.EvidenceInterlockHolder] = interlockHolder
					}
					if releases {
						c.drop = []string{lock + "#"}
					}
					return c
				}
			}
			rows = append(rows, row)
			return id
		}
		// The live holder is added first, so that the interlock it holds is the one seeded.
		live := add("live background holding the interlock", "shared", true, now.Add(-liveSince), "self", false)
		add("idle background whose interlock another run holds", "shared", true, now.Add(-idleFor), live, true)
		add("idle background holding its interlock", "solo", true, now.Add(-idleFor), "self", true)
		add("idle foreground", "fg", false, now.Add(-idleFor), "", true)
		add("live foreground", "fg2", false, now.Add(-liveSince), "", false)
		putDocs(t, r.fs, docs)
		return trialRows{input: map[string]any{"older_than_ms": olderThanMs}, rows: rows}
	}
	return r
}

// pmSweepRig: per trial, a queue of three silent working tasks (reclaimed: a preempt heartbeat on
// the seen head, a reclaim status, back to new) and two that heartbeat recently (kept).
func pmSweepRig(t *testing.T) *rig {
	r := newRig(t, contract.PMSweep, "reclaim_count")
	tasks := ledger.NewTaskStore(r.fs, ledger.TxConfig{})
	r.use(pmsweep.New(tasks, pmsweep.Config{Bounds: agesweep.Bounds{Concurrency: 4}}, ledgertest.LocalClock(r.clock.Now)).Definition())
	r.warm = func(t *testing.T) { warmFirestore(t, r) }
	const reclaimer = "reliability"
	r.seed = func(t reporter, trial int) trialRows {
		queue := fmt.Sprintf("q-%d-%s", trial, uuid.NewString()[:8])
		now := r.clock.Now()
		// A reclaim stamps last_activity_at with Firestore's time of its commit, after this.
		seededAt := time.Now().Truncate(time.Millisecond)
		docs := map[string]map[string]any{}
		var rows []seededRow
		add := func(name string, active time.Time, reclaim bool) {
			id := "task-" + uuid.NewString()[:13]
			doc := ledger.TaskQueuesCollection + "/" + queue + "/" + ledger.TasksCollection + "/" + id
			worker := "worker-" + id[5:]
			heads, entries := seedTask(docs, doc, id, worker, active)
			ch := reclaimTask(doc, id, heads, now, matcher(stampedSince(seededAt)), reclaimer, 1)
			row := seededRow{name: name, doc: doc, settles: reclaim,
				unit: unit{docs: slices.Compact(slices.Sorted(slices.Values(append(append([]string{doc}, entries...), ch.docs()...)))),
					subs: map[string][]string{doc: {ledger.ChainStatuses, ledger.ChainReports, ledger.ChainHeartbeats}}}}
			if reclaim {
				row.change = func(string) *change { return ch }
			}
			rows = append(rows, row)
		}
		for i := range 3 {
			add(fmt.Sprintf("silent %d", i), now.Add(-idleFor), true)
		}
		add("heartbeating 1", now.Add(-liveSince), false)
		add("heartbeating 2", now.Add(-2*liveSince), false)
		putDocs(t, r.fs, docs)
		return trialRows{input: map[string]any{"queue": queue, "ttl": 300, "reclaimer": reclaimer}, rows: rows}
	}
	return r
}

// chainHeads are a seeded task's status and heartbeat heads.
type chainHeads struct{ status, heartbeat string }

// seedTask adds a working task claimed by worker — its enqueue status, its claim status and
// claim heartbeat, chained and named as ledgertest.Tasks.Enqueue and Next name them — to docs,
// and returns its heads and the paths of its chain entries.
func seedTask(docs map[string]map[string]any, doc, id, worker string, active time.Time) (chainHeads, []string) {
	created := active.Add(-time.Minute)
	var paths []string
	entry := func(chain, prev string, at time.Time, payload map[string]any) string {
		e := ledger.Entry{CreatedAt: at, Prev: prev, Payload: payload}
		eid := entryID(id, chain, e)
		path := doc + "/" + chain + "/" + eid
		docs[path] = map[string]any{"created_at": at, "prev": prev, "payload": payload}
		paths = append(paths, path)
		return eid
	}
	s1 := entry(ledger.ChainStatuses, "", created, map[string]any{"status": ledger.TaskNew})
	s2 := entry(ledger.ChainStatuses, s1, active, map[string]any{"status": ledger.TaskWorking, "worker_id": worker})
	h1 := entry(ledger.ChainHeartbeats, "", active, map[string]any{"worker_id": worker, "claim": true})
	docs[doc] = map[string]any{
		"slug": "slug-" + id, "status": ledger.TaskWorking, "worker_id": worker, "created_at": created, "last_activity_at": active,
		"status_tip": s2, "report_tip": "", "heartbeat_tip": h1, "reclaim_count": int64(0),
	}
	return chainHeads{status: s2, heartbeat: h1}, paths
}

// reclaimTask is ledger.TaskStore.ReclaimTask's one commit: a preempt heartbeat chained on the
// seen head, a reclaim status chained on the status head, and the task back to new with both
// new heads, reclaim_count+1, its worker gone and last_activity_at stamped (Firestore's time of
// the commit: a matcher of it).
func reclaimTask(doc, id string, heads chainHeads, now time.Time, stamped any, reclaimer string, count int64) *change {
	hbPayload := map[string]any{"preempt": true, "reclaimer": reclaimer}
	stPayload := map[string]any{"status": ledger.TaskNew, "reclaimed": true, "reclaimer": reclaimer, "reclaim_count": count}
	hb := entryID(id, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: now, Prev: heads.heartbeat, Payload: hbPayload})
	st := entryID(id, ledger.ChainStatuses, ledger.Entry{CreatedAt: now, Prev: heads.status, Payload: stPayload})
	d, h, s := doc+"#", doc+"/"+ledger.ChainHeartbeats+"/"+hb+"#", doc+"/"+ledger.ChainStatuses+"/"+st+"#"
	return &change{
		set: map[string]any{
			d + "status": ledger.TaskNew, d + "status_tip": st, d + "heartbeat_tip": hb, d + "reclaim_count": count, d + "last_activity_at": stamped,
			h + "created_at": now, h + "prev": heads.heartbeat, h + "payload.preempt": true, h + "payload.reclaimer": reclaimer,
			s + "created_at": now, s + "prev": heads.status, s + "payload.status": ledger.TaskNew, s + "payload.reclaimed": true,
			s + "payload.reclaimer": reclaimer, s + "payload.reclaim_count": count,
		},
		drop: []string{d + "worker_id"},
	}
}

// leaseSettleRig: per trial, a runner group with a terminated and a running instance, and five
// active leases: two held by the terminated instance (abandoned, holder_terminal), one whose
// holder cannot be found with a stale heartbeat (abandoned on age), one held by the running
// instance with a stale heartbeat and one unresolvable with a fresh heartbeat (both kept). The
// group and its instances are never written.
func leaseSettleRig(t *testing.T) *rig {
	r := newRig(t, contract.WorkspaceLeaseSettle, "settlement")
	leases := ledger.NewLeaseStore(r.fs, ledger.TxConfig{})
	r.use(leasesettle.New(leases, leasesettle.Config{Bounds: agesweep.Bounds{Concurrency: 4}}, ledgertest.LocalClock(r.clock.Now)).Definition())
	r.warm = func(t *testing.T) { warmFirestore(t, r) }
	const timeoutSeconds = 300
	r.seed = func(t reporter, trial int) trialRows {
		org, group := uuid.NewString(), uuid.NewString()
		now := r.clock.Now()
		docs := map[string]map[string]any{}
		var rows []seededRow
		fixed := func(name, doc string, data map[string]any) {
			docs[doc] = data
			rows = append(rows, seededRow{name: name, unit: unit{docs: []string{doc}}, doc: doc})
		}
		fixed("group", ledger.RunnerGroupsCollection+"/"+group, map[string]any{"organization_uuid": org, "heartbeat_timeout_seconds": int64(timeoutSeconds)})
		fixed("organization", ledger.OrganizationsCollection+"/"+org, map[string]any{"sweeps_enabled": true})
		instance := func(st string) string {
			id := uuid.NewString()
			fixed("instance "+st, ledger.RunnerInstancesCollection+"/"+id, map[string]any{"organization_uuid": org, "runner_group_uuid": group, "status": st})
			return id
		}
		dead, alive := instance(ledger.InstanceTerminated), instance(ledger.InstanceRunning)
		add := func(name, holder string, heartbeat time.Time, why string) {
			id := uuid.NewString()
			doc := ledger.WorkspaceLeasesCollection + "/" + id
			docs[doc] = map[string]any{
				"organization_uuid": org, "runner_group_uuid": group, "workspace_id": "ws-" + id[:8],
				"holder_runner_instance_uuid": holder, "status": ledger.LeaseActive, "acquired_at": heartbeat.Add(-time.Hour), "heartbeat_at": heartbeat,
			}
			row := seededRow{name: name, unit: unit{docs: []string{doc}}, doc: doc, settles: why != ""}
			if why != "" {
				resolved := why == leasesettle.ReasonHolderTerminal
				holderStatus := ""
				if resolved {
					holderStatus = ledger.InstanceTerminated
				}
				d := doc + "#"
				row.change = func(runUUID string) *change {
					return &change{set: map[string]any{
						d + "status": ledger.LeaseAbandoned, d + "released_at": now,
						d + "settlement.at": now, d + "settlement.workflow_run_uuid": runUUID, d + "settlement.reason": why,
						d + "settlement.evidence.holder_runner_instance_uuid": holder, d + "settlement.evidence.holder_resolved": resolved,
						d + "settlement.evidence.holder_status": holderStatus, d + "settlement.evidence.heartbeat_at": heartbeat,
						d + "settlement.evidence.heartbeat_age_seconds":     int64(now.Sub(heartbeat) / time.Second),
						d + "settlement.evidence.heartbeat_timeout_seconds": int64(timeoutSeconds),
					}}
				}
			}
			rows = append(rows, row)
		}
		add("held by a terminated instance, fresh", dead, now.Add(-liveSince), leasesettle.ReasonHolderTerminal)
		add("held by a terminated instance, stale", dead, now.Add(-idleFor), leasesettle.ReasonHolderTerminal)
		add("unresolvable holder, stale", "gone-"+uuid.NewString(), now.Add(-idleFor), leasesettle.ReasonHolderUnresolvableStale)
		add("running holder, stale", alive, now.Add(-idleFor), "")
		add("unresolvable holder, fresh", "gone-"+uuid.NewString(), now.Add(-liveSince), "")
		putDocs(t, r.fs, docs)
		return trialRows{input: map[string]any{"organization_uuid": org, "runner_group_uuid": group}, rows: rows}
	}
	return r
}

// entryID is ledger.EntryID of an entry the test built, whose payload always encodes.
func entryID(task, chain string, e ledger.Entry) string {
	id, err := ledger.EntryID(task, chain, e)
	if err != nil {
		panic(err)
	}
	return id
}

// stampedSince accepts a server timestamp Firestore took after since (on this host's clock,
// which the emulator shares) and before the check.
func stampedSince(since time.Time) func(v any) string {
	return func(v any) string {
		if t, ok := v.(time.Time); !ok || t.Before(since) || t.After(time.Now()) {
			return fmt.Sprintf("want Firestore's time of the write, after %v and not after now", since)
		}
		return ""
	}
}
