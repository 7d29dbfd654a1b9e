package pmsweep_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/anishathalye/porcupine"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
)

// The model: each task's heartbeat chain is a compare-and-swap register on its head, plus
// whether the task is still the worker's. A heartbeat, a reclaim and a completion each succeed
// if and only if the head is the one they expect and the task is working; a heartbeat moves the
// head, a reclaim moves it and takes the task away, a completion ends the work.
type op struct {
	Task   string
	Kind   string // heartbeat | reclaim | complete
	Expect string // the head the caller holds (a worker) or saw (a sweeper)
	New    string // the head a successful heartbeat or reclaim leaves
}

type headState struct {
	Tip     string
	Working bool
}

func model(initial map[string]string) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, o := range history {
				t := o.Input.(op).Task
				by[t] = append(by[t], o)
			}
			out := make([][]porcupine.Operation, 0, len(by))
			for _, ops := range by {
				out = append(out, ops)
			}
			return out
		},
		Init: func() any { return map[string]headState{} },
		Step: func(state, input, output any) (bool, any) {
			in, ok := input.(op), output.(bool)
			s := state.(map[string]headState)
			cur, seen := s[in.Task]
			if !seen {
				cur = headState{Tip: initial[in.Task], Working: true}
			}
			legal := cur.Working && cur.Tip == in.Expect
			if ok != legal {
				return false, state
			}
			if !ok {
				return true, state
			}
			next := cur
			switch in.Kind {
			case "heartbeat":
				next.Tip = in.New
			case "reclaim":
				next.Tip, next.Working = in.New, false
			case "complete":
				next.Working = false
			}
			copied := make(map[string]headState, len(s)+1)
			for k, v := range s {
				copied[k] = v
			}
			copied[in.Task] = next
			return true, copied
		},
		Equal: func(a, b any) bool {
			x, y := a.(map[string]headState), b.(map[string]headState)
			if len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if y[k] != v {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output any) string {
			in := input.(op)
			return fmt.Sprintf("%s %s expect %.8s → %v", in.Task, in.Kind, in.Expect, output)
		},
	}
}

// recorder collects a concurrent history.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (r *recorder) record(client int, in op, call func() (bool, error)) bool {
	begin := time.Since(r.start).Nanoseconds()
	ok, err := call()
	end := time.Since(r.start).Nanoseconds()
	if err != nil {
		// A transaction that failed for any other reason (lock timeout, say) committed
		// nothing: it is not an operation on the register.
		return false
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: begin, Output: ok, Return: end})
	r.mu.Unlock()
	return ok
}

// headMoved maps the ledger's fencing error to a failed compare-and-swap.
func headMoved(err error) (bool, error) {
	if errors.Is(err, ledger.ErrHeadMoved) {
		return false, nil
	}
	return err == nil, err
}

func heartbeatID(l ledger.Lease, at time.Time) string {
	return ledger.EntryID(l.TaskID, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: at, Prev: l.HeartbeatTip, Payload: map[string]any{"worker_id": l.WorkerID}})
}

func preemptID(task, prev string, at time.Time, reclaimer string) string {
	return ledger.EntryID(task, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: at, Prev: prev, Payload: map[string]any{"preempt": true, "reclaimer": reclaimer}})
}

// reclaimFunc reclaims a task seen with a given heartbeat head and activity.
type reclaimFunc func(ctx context.Context, e *env, task, seen string, activity, at time.Time, reclaimer string) (bool, error)

func casReclaim(ctx context.Context, e *env, task, seen string, activity, at time.Time, reclaimer string) (bool, error) {
	r, err := e.tasks.ReclaimTask(ctx, e.queue, task, seen, activity, at, reclaimer, 0)
	return r.Reclaimed, err
}

// blindReclaim is a deliberately broken reclaim: it writes the preempt heartbeat and the new
// status without comparing the heartbeat head with the one the sweep saw.
func blindReclaim(ctx context.Context, e *env, task, seen string, _, at time.Time, reclaimer string) (bool, error) {
	ref := e.fs.Collection(ledger.TaskQueuesCollection).Doc(e.queue).Collection(ledger.TasksCollection).Doc(task)
	err := e.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		hb := ledger.Entry{CreatedAt: at.UTC().Truncate(time.Microsecond), Prev: seen, Payload: map[string]any{"preempt": true, "reclaimer": reclaimer}}
		id := ledger.EntryID(task, ledger.ChainHeartbeats, hb)
		if err := tx.Set(ref.Collection(ledger.ChainHeartbeats).Doc(id), hb); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "status", Value: ledger.TaskNew}, {Path: "heartbeat_tip", Value: id}})
	})
	return err == nil, err
}

// history runs, per task, one live worker heartbeating then completing, a zombie holding the
// task's first lease, and two sweepers that snapshot the head and reclaim, all at once.
func history(t *testing.T, seed uint64, tasks int, reclaim reclaimFunc) ([]porcupine.Operation, map[string]string) {
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	leases := e.claimed(tasks)
	initial := map[string]string{}
	for _, l := range leases {
		initial[l.TaskID] = l.HeartbeatTip
	}
	rec := &recorder{start: time.Now()}
	var clock atomic.Int64 // distinct times make distinct entries
	at := func() time.Time { return epoch.Add(time.Duration(clock.Add(1)) * time.Microsecond) }
	var wg sync.WaitGroup
	client := 0
	for i, lease := range leases {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(4)
		go func(l ledger.Lease, id int) { // the live worker
			defer wg.Done()
			for range 4 + rng.IntN(4) {
				now := at()
				want := heartbeatID(l, now)
				var next ledger.Lease
				if !rec.record(id, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: want}, func() (bool, error) {
					var err error
					next, err = e.tasks.Heartbeat(ctx, l, now)
					return headMoved(err)
				}) {
					return
				}
				l = next
			}
			rec.record(id, op{Task: l.TaskID, Kind: "complete", Expect: l.HeartbeatTip}, func() (bool, error) {
				return headMoved(e.tasks.Complete(ctx, l, at()))
			})
		}(lease, client)
		go func(l ledger.Lease, id int) { // the zombie: it never moves off the first lease
			defer wg.Done()
			for range 3 {
				now := at()
				rec.record(id, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: heartbeatID(l, now)}, func() (bool, error) {
					_, err := e.tasks.Heartbeat(ctx, l, now)
					return headMoved(err)
				})
			}
		}(lease, client+1)
		for s := range 2 { // the sweepers
			go func(task string, id int) {
				defer wg.Done()
				for range 3 {
					snap, err := e.tasks.GetTask(ctx, e.queue, task)
					if err != nil || snap.Status != ledger.TaskWorking {
						return
					}
					now := at()
					who := fmt.Sprintf("sweeper-%d", id)
					rec.record(id, op{Task: task, Kind: "reclaim", Expect: snap.HeartbeatTip, New: preemptID(task, snap.HeartbeatTip, now, who)}, func() (bool, error) {
						return reclaim(ctx, e, task, snap.HeartbeatTip, snap.LastActivityAt, now, who)
					})
				}
			}(lease.TaskID, client+2+s)
		}
		client += 4
	}
	wg.Wait()
	return rec.ops, initial
}

func TestReclaimsHeartbeatsAndCompletionsAreLinearizable(t *testing.T) {
	t.Parallel()
	histories, ops := 0, 0
	for seed := range uint64(6) {
		h, initial := history(t, seed, 8, casReclaim)
		res := porcupine.CheckOperationsTimeout(model(initial), h, 30*time.Second)
		histories++
		ops += len(h)
		if res != porcupine.Ok {
			t.Errorf("seed %d: a history of %d operations is %s", seed, len(h), res)
		}
	}
	t.Logf("checked %d concurrent histories, %d operations (8 tasks each: a worker, a zombie, two sweepers): all linearizable", histories, ops)
}

// The check can fail: a reclaim that does not compare the head it saw lets a sweep evict a
// worker whose heartbeat landed in between, and the checker must say so.
func TestABlindReclaimIsReportedIllegal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pmsweep.Config{}, nil)
	ctx := context.Background()
	l := e.claimed(1)[0]
	initial := map[string]string{l.TaskID: l.HeartbeatTip}
	rec := &recorder{start: time.Now()}

	// The sweeper snapshots the head; the live worker heartbeats; then the sweeper reclaims with
	// the head it saw.
	snap, err := e.tasks.GetTask(ctx, e.queue, l.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	beat := epoch.Add(time.Second)
	rec.record(0, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: heartbeatID(l, beat)}, func() (bool, error) {
		_, err := e.tasks.Heartbeat(ctx, l, beat)
		return headMoved(err)
	})
	reclaimAt := epoch.Add(2 * time.Second)
	in := op{Task: l.TaskID, Kind: "reclaim", Expect: snap.HeartbeatTip, New: preemptID(l.TaskID, snap.HeartbeatTip, reclaimAt, "s")}

	good := append([]porcupine.Operation(nil), rec.ops...)
	okGood, err := casReclaim(ctx, e, l.TaskID, snap.HeartbeatTip, snap.LastActivityAt, reclaimAt, "s")
	if err != nil {
		t.Fatal(err)
	}
	good = append(good, porcupine.Operation{ClientId: 1, Input: in, Call: time.Since(rec.start).Nanoseconds(), Output: okGood, Return: time.Since(rec.start).Nanoseconds() + 1})
	if res := porcupine.CheckOperations(model(initial), good); !res || okGood {
		t.Fatalf("the compare-and-swap reclaim: reclaimed=%t, linearizable=%t; want refused and linearizable", okGood, res)
	}

	rec.record(1, in, func() (bool, error) {
		return blindReclaim(ctx, e, l.TaskID, snap.HeartbeatTip, snap.LastActivityAt, reclaimAt, "s")
	})
	if porcupine.CheckOperations(model(initial), rec.ops) {
		t.Error("a history in which a blind reclaim evicted a worker that had just heartbeated was judged linearizable")
	}
}
