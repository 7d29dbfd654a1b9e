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
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
)

// The model: each task's heartbeat chain is a compare-and-swap register on its head, plus
// whether the task is being worked. A heartbeat, a report, a reclaim and a completion each
// succeed if and only if the head is the one they expect and the task is working; a heartbeat
// moves the head, a report leaves it, a reclaim moves it and takes the task away, a completion
// ends the work. A claim — a second worker taking a reclaimed task — succeeds only on a task not
// being worked, and puts it to work on a head of its own: whoever still holds an older head (a
// zombie) can do nothing to it.
type op struct {
	Task   string
	Kind   string // heartbeat | report | reclaim | complete | claim
	Expect string // the head the caller holds (a worker) or saw (a sweeper); none for a claim
	New    string // the head a successful heartbeat, reclaim or claim leaves
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
			if in.Kind == "claim" {
				legal = !cur.Working
			}
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
			case "claim":
				next.Tip, next.Working = in.New, true
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

// claim records a second worker's claim, whose task is known only once it returns: a claim
// that got none (nothing new, or only contended candidates) is no operation on any task.
func (r *recorder) claim(client int, call func() (ledgertest.Lease, error)) (ledgertest.Lease, bool) {
	begin := time.Since(r.start).Nanoseconds()
	l, err := call()
	end := time.Since(r.start).Nanoseconds()
	if err != nil {
		return l, false
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: op{Task: l.TaskID, Kind: "claim", New: l.HeartbeatTip}, Call: begin, Output: true, Return: end})
	r.mu.Unlock()
	return l, true
}

// headMoved maps a worker's fencing error (ledgertest's) to a failed compare-and-swap.
func headMoved(err error) (bool, error) {
	if errors.Is(err, ledgertest.ErrHeadMoved) {
		return false, nil
	}
	return err == nil, err
}

func heartbeatID(l ledgertest.Lease, at time.Time) string {
	return entryID(l.TaskID, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: at, Prev: l.HeartbeatTip, Payload: map[string]any{"worker_id": l.WorkerID}})
}

func preemptID(task, prev string, at time.Time, reclaimer string) string {
	return entryID(task, ledger.ChainHeartbeats, ledger.Entry{CreatedAt: at, Prev: prev, Payload: map[string]any{"preempt": true, "reclaimer": reclaimer}})
}

// reclaimFunc reclaims a task seen with a given heartbeat head and activity.
type reclaimFunc func(ctx context.Context, e *env, task, seen string, activity, at time.Time, reclaimer string) (bool, error)

func casReclaim(ctx context.Context, e *env, task, seen string, activity, at time.Time, reclaimer string) (bool, error) {
	r, err := e.tasks.ReclaimTask(ctx, e.queue, task, reclaimer, nil, at, pmsweep.Reclaimable(ledger.Task{HeartbeatTip: seen, LastActivityAt: activity}, 0))
	return r.Reclaimed, err
}

// blindReclaim is a deliberately broken reclaim: it writes the preempt heartbeat and the new
// status without comparing the heartbeat head with the one the sweep saw.
func blindReclaim(ctx context.Context, e *env, task, seen string, _, at time.Time, reclaimer string) (bool, error) {
	ref := e.FS.Collection(ledger.TaskQueuesCollection).Doc(e.queue).Collection(ledger.TasksCollection).Doc(task)
	err := e.FS.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		hb := ledger.Entry{CreatedAt: at.UTC().Truncate(time.Microsecond), Prev: seen, Payload: map[string]any{"preempt": true, "reclaimer": reclaimer}}
		id := entryID(task, ledger.ChainHeartbeats, hb)
		if err := tx.Set(ref.Collection(ledger.ChainHeartbeats).Doc(id), hb); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "status", Value: ledger.TaskNew}, {Path: "heartbeat_tip", Value: id}})
	})
	return err == nil, err
}

// history runs, per task, one live worker heartbeating then completing, a zombie holding the
// task's first lease, two sweepers that snapshot the head and reclaim, and a second worker that
// claims whatever the sweepers reclaimed, all at once. Once its task has been claimed again (or
// nothing is left to claim), the zombie tries to report on it and to complete it.
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
	var wg, sweeping, claiming sync.WaitGroup
	// claimedAgain is closed once a second worker claims the task. A task can be claimed again
	// more than once (a sweeper may reclaim a second worker's lease too), so it closes once.
	claimedAgain := map[string]chan struct{}{}
	closeOnce := map[string]*sync.Once{}
	for _, l := range leases {
		claimedAgain[l.TaskID] = make(chan struct{})
		closeOnce[l.TaskID] = &sync.Once{}
	}
	secondsDone := make(chan struct{})
	client := 0
	for i, lease := range leases {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(4)
		sweeping.Add(2)
		go func(l ledgertest.Lease, id int) { // the live worker
			defer wg.Done()
			for range 4 + rng.IntN(4) {
				now := at()
				want := heartbeatID(l, now)
				var next ledgertest.Lease
				if !rec.record(id, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: want}, func() (bool, error) {
					var err error
					next, err = e.worker.Heartbeat(ctx, l, now)
					return headMoved(err)
				}) {
					return
				}
				l = next
			}
			rec.record(id, op{Task: l.TaskID, Kind: "complete", Expect: l.HeartbeatTip}, func() (bool, error) {
				return headMoved(e.worker.Complete(ctx, l, at()))
			})
		}(lease, client)
		go func(l ledgertest.Lease, id int) { // the zombie: it never moves off the first lease
			defer wg.Done()
			for range 3 {
				now := at()
				rec.record(id, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: heartbeatID(l, now)}, func() (bool, error) {
					_, err := e.worker.Heartbeat(ctx, l, now)
					return headMoved(err)
				})
			}
			select { // until its task is claimed again, or nothing more will be
			case <-claimedAgain[l.TaskID]:
			case <-secondsDone:
			}
			rec.record(id, op{Task: l.TaskID, Kind: "report", Expect: l.HeartbeatTip}, func() (bool, error) {
				_, err := e.worker.Report(ctx, l, "zombie", at())
				return headMoved(err)
			})
			rec.record(id, op{Task: l.TaskID, Kind: "complete", Expect: l.HeartbeatTip}, func() (bool, error) {
				return headMoved(e.worker.Complete(ctx, l, at()))
			})
		}(lease, client+1)
		for s := range 2 { // the sweepers
			go func(task string, id int) {
				defer wg.Done()
				defer sweeping.Done()
				for range 3 {
					snap, err := ledgertest.Value(e.tasks.Row(ctx, e.queue, task))
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
	// The second workers: each claims what the sweepers reclaimed, until they are done and
	// nothing is left, then heartbeats once and completes what it claimed.
	sweepersDone := make(chan struct{})
	go func() { sweeping.Wait(); close(sweepersDone) }()
	for w := range 2 {
		claiming.Add(1)
		go func(id int) {
			defer claiming.Done()
			for {
				done := false
				select {
				case <-sweepersDone:
					done = true
				default:
				}
				l, ok := rec.claim(id, func() (ledgertest.Lease, error) {
					return e.worker.Next(ctx, e.queue, fmt.Sprintf("second-%d", id), at())
				})
				if !ok {
					if done {
						return
					}
					continue
				}
				closeOnce[l.TaskID].Do(func() { close(claimedAgain[l.TaskID]) })
				beat := at()
				var next ledgertest.Lease
				if rec.record(id, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: heartbeatID(l, beat)}, func() (bool, error) {
					var err error
					next, err = e.worker.Heartbeat(ctx, l, beat)
					return headMoved(err)
				}) {
					l = next
				}
				rec.record(id, op{Task: l.TaskID, Kind: "complete", Expect: l.HeartbeatTip}, func() (bool, error) {
					return headMoved(e.worker.Complete(ctx, l, at()))
				})
			}
		}(client + w)
	}
	go func() { claiming.Wait(); close(secondsDone) }()
	wg.Wait()
	claiming.Wait()
	return rec.ops, initial
}

func TestReclaimsHeartbeatsAndCompletionsAreLinearizable(t *testing.T) {
	t.Parallel()
	histories, ops, claims := 0, 0, 0
	for seed := range uint64(6) {
		h, initial := history(t, seed, 8, casReclaim)
		res := porcupine.CheckOperationsTimeout(model(initial), h, 30*time.Second)
		histories++
		ops += len(h)
		for _, o := range h {
			if o.Input.(op).Kind == "claim" {
				claims++
			}
		}
		if res != porcupine.Ok {
			t.Errorf("seed %d: a history of %d operations is %s", seed, len(h), res)
		}
	}
	if claims == 0 {
		t.Error("no reclaimed task was claimed again: the zombie's writes after a second claim went unchecked")
	}
	t.Logf("checked %d concurrent histories, %d operations (8 tasks each: a worker, a zombie, two sweepers; two second workers claimed %d reclaimed tasks again): all linearizable", histories, ops, claims)
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
	snap, err := ledgertest.Value(e.tasks.Row(ctx, e.queue, l.TaskID))
	if err != nil {
		t.Fatal(err)
	}
	beat := epoch.Add(time.Second)
	rec.record(0, op{Task: l.TaskID, Kind: "heartbeat", Expect: l.HeartbeatTip, New: heartbeatID(l, beat)}, func() (bool, error) {
		_, err := e.worker.Heartbeat(ctx, l, beat)
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

// entryID is ledger.EntryID of an entry the test built, whose payload always encodes.
func entryID(task, chain string, e ledger.Entry) string {
	id, err := ledger.EntryID(task, chain, e)
	if err != nil {
		panic(err)
	}
	return id
}
