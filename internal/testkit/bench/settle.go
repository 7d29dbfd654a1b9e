package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// settled is what one settling measurement saw.
type settled struct {
	elapsed                   time.Duration
	syncing                   time.Duration // of elapsed, the time the runs' syncs took (their pools)
	calling                   time.Duration // the executor calls' durations, summed over the pool's workers
	rows, started, candidates int
	runs                      int
	reads, writes, queries    int // on runner_executions, counted on the wire
	calls                     int64
}

func (s settled) perSecond() float64 { return float64(s.rows) / s.elapsed.Seconds() }

// timedStarter is a Starter that adds up how long its Start calls took: a run's pool of syncs,
// apart from its scan, its count and its run record.
type timedStarter struct {
	executionsync.Starter
	took time.Duration
}

func (t *timedStarter) Start(ctx context.Context, reqs []message.Sync) []executionsync.SyncResult {
	began := time.Now()
	defer func() { t.took += time.Since(began) }()
	return t.Starter.Start(ctx, reqs)
}

// timedExecutor adds up how long its Observe calls took, summed over the workers making them.
type timedExecutor struct {
	executor.Executor
	took atomic.Int64 // nanoseconds
}

func (t *timedExecutor) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	began := time.Now()
	defer func() { t.took.Add(int64(time.Since(began))) }()
	return t.Executor.Observe(ctx, ref)
}

// settling is a dataset of stale rows whose executions Cloud Run reports succeeded (and rows
// without a provider reference), and the execution-sync workflow settling them one run at a
// time, syncs inline at concurrency conc: as the app builds it, the blind-executor guard on.
type settling struct {
	e        *env
	n        int
	spy      *fsspy.Spy
	engine   *workflow.Engine
	input    json.RawMessage
	pool     *timedStarter
	exec     *timedExecutor
	calls    int64
	s        settled
	finished bool
	close    func()
}

func newSettling(ctx context.Context, e *env, n, missing, conc int, latency time.Duration) (*settling, error) {
	spy := fsspy.New()
	fs, done, err := project(ctx, spy)
	if err != nil {
		return nil, err
	}
	w := &settling{e: e, n: n, spy: spy}
	w.close = func() { e.fake.SetLatency(cloudrunfake.GetExecution, 0); done() }
	fail := func(err error) (*settling, error) { w.close(); return nil, err }
	org := uuid.NewString()
	if err := (ledgertest.Organizations{Client: fs}).Put(ctx, ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
		return fail(err)
	}
	old := time.Now().Add(-10 * time.Minute).Truncate(time.Microsecond)
	ids := newIDs(n + missing)
	for i := range n {
		name := cloudrunfake.ExecutionName("bench", "europe-west1", "job", ids[i])
		if err := e.fake.SetExecution(cloudrunfake.Succeeded(name, old)); err != nil {
			return fail(err)
		}
	}
	err = bulk(ctx, fs, len(ids), func(i int) (*firestore.DocumentRef, any) {
		row := ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: old}
		if i < n {
			row.ProviderRef = map[string]any{"execution": cloudrunfake.ExecutionName("bench", "europe-west1", "job", ids[i])}
		}
		return fs.Collection(ledger.ExecutionsCollection).Doc(ids[i]), row
	})
	if err != nil {
		return fail(err)
	}
	e.fake.SetLatency(cloudrunfake.GetExecution, latency)

	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	adapter := &timedExecutor{Executor: cloudrun.New(e.run, cloudrun.Config{})}
	w.exec = adapter
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun, Concurrency: conc, Budget: 30 * time.Minute}.WithDefaults()
	// As the app builds it: the blind-executor guard on (it reads nothing for rows the executor
	// knows; what it costs a healthy target is the sync.target each answer writes).
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: adapter, Kind: executionsync.CloudRun, LostGrace: cfg.LostGrace,
		Guard: blindguard.New(targetstore.New(fs, ledger.Retention{}), blindguard.Config{}, logging.Discard())})
	w.pool = &timedStarter{Starter: &executionsync.Inline{Syncer: syncer, Concurrency: conc}}
	wf, err := executionsync.New(store, adapter, w.pool, cfg, time.Now, nil)
	if err != nil {
		return fail(err)
	}
	w.engine = workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: time.Now, Log: logging.Discard()},
		wf.Definition(executionsync.CloudRun))
	w.input, _ = json.Marshal(map[string]any{"organization_uuid": org, "limit": executionsync.LimitMax})
	spy.Reset()
	w.calls = e.calls.Load()
	return w, nil
}

// run makes one run, its time added to the measurement; false once nothing syncable is left.
func (w *settling) run(ctx context.Context) (bool, error) {
	s := &w.s
	if w.finished || s.rows >= w.n {
		return false, nil
	}
	begin := time.Now()
	out, err := w.engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: w.input, Trigger: workflow.TriggerLocal})
	s.elapsed += time.Since(begin)
	if err != nil {
		return false, err
	}
	if out.Status != workflow.StateCompleted {
		return false, fmt.Errorf("run %s failed: %v", out.RunUUID, out.Err)
	}
	var st executionsync.Stats
	var o executionsync.Output
	b, _ := json.Marshal(out.Stats)
	_ = json.Unmarshal(b, &st)
	b, _ = json.Marshal(out.Output)
	_ = json.Unmarshal(b, &o)
	s.runs++
	s.rows += st.Settled["succeeded"]
	s.started += o.StartedCount
	s.candidates += o.CandidateCount
	if o.StartedCount == 0 {
		w.finished = true // nothing syncable left (a missing-metadata-only dataset)
		return false, nil
	}
	if s.runs > 4*w.n/executionsync.LimitMax+10 {
		return false, fmt.Errorf("%d runs settled only %d of %d rows", s.runs, s.rows, w.n)
	}
	return s.rows < w.n, nil
}

// result is what the runs so far did, counted on the wire.
func (w *settling) result() settled {
	s := w.s
	s.syncing = w.pool.took
	s.calling = time.Duration(w.exec.took.Load())
	s.calls = w.e.calls.Load() - w.calls
	for _, d := range w.spy.Reads() {
		if strings.Contains(d, "/"+ledger.ExecutionsCollection+"/") {
			s.reads++
		}
	}
	for _, wr := range w.spy.Writes() {
		if strings.Contains(wr.Document, "/"+ledger.ExecutionsCollection+"/") {
			s.writes++
		}
	}
	for _, q := range w.spy.Queries() {
		if fsspy.Shape(q).Collection == ledger.ExecutionsCollection {
			s.queries++
		}
	}
	return s
}

// settleRows settles n rows (and reports missing rows without a provider reference) by runs
// until every syncable row is settled.
func settleRows(ctx context.Context, e *env, n, missing, conc int, latency time.Duration) (settled, error) {
	w, err := newSettling(ctx, e, n, missing, conc, latency)
	if err != nil {
		return settled{}, err
	}
	defer w.close()
	for {
		more, err := w.run(ctx)
		if err != nil {
			return w.result(), err
		}
		if !more {
			return w.result(), nil
		}
	}
}

// rawSide is n rows shaped like the settled ones, and bare read-modify-write transactions on
// them, conc at a time: the limits the workflow is measured against. A plain side reads and
// writes only the row; an equal-work side reads what a settling transaction reads (the row, its
// organization, the workflow's two pauses over it, in one GetAll) and writes the fields a
// settlement writes.
type rawSide struct {
	refs    []*firestore.DocumentRef
	others  []*firestore.DocumentRef // read beside each row by the equal-work side
	fs      *firestore.Client
	next    int
	elapsed time.Duration
	close   func()
}

func newRawSide(ctx context.Context, n int, equal bool) (*rawSide, error) {
	fs, done, err := project(ctx, nil)
	if err != nil {
		return nil, err
	}
	r := &rawSide{fs: fs, refs: make([]*firestore.DocumentRef, n), close: done}
	org := "raw"
	if equal {
		if err := (ledgertest.Organizations{Client: fs}).Put(ctx, ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
			done()
			return nil, err
		}
		r.others = append(r.others, fs.Collection(ledger.OrganizationsCollection).Doc(org))
		for _, id := range pausestore.PauseIDs(string(contract.ExecutionSyncCloudRun), org) {
			r.others = append(r.others, fs.Collection(pausestore.PausesCollection).Doc(id))
		}
	}
	old := time.Now().Add(-10 * time.Minute)
	err = bulk(ctx, fs, n, func(i int) (*firestore.DocumentRef, any) {
		r.refs[i] = fs.Collection(ledger.ExecutionsCollection).Doc(uuid.NewString())
		return r.refs[i], ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: old,
			ProviderRef: map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"}}
	})
	if err != nil {
		done()
		return nil, err
	}
	return r, nil
}

// step makes the next k transactions, conc at a time, its time added to the measurement; none
// once every row has had its turn.
func (r *rawSide) step(ctx context.Context, k, conc int) error {
	refs := r.refs[r.next:min(r.next+k, len(r.refs))]
	if len(refs) == 0 {
		return nil
	}
	r.next += len(refs)
	var failed atomic.Int64
	begin := time.Now()
	parallel.ForEach(ctx, len(refs), conc, func(i int) bool {
		err := r.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			snaps, err := tx.GetAll(append([]*firestore.DocumentRef{refs[i]}, r.others...))
			if err != nil {
				return err
			}
			attempts, _ := snaps[0].DataAt("sync.attempts")
			a, _ := attempts.(int64)
			if r.others == nil {
				return tx.Update(refs[i], []firestore.Update{{Path: "observed_at", Value: time.Now()}, {Path: "sync.attempts", Value: a + 1}})
			}
			now := time.Now()
			return tx.Update(refs[i], []firestore.Update{
				{Path: "status", Value: ledger.StatusSucceeded}, {Path: "active", Value: false}, {Path: "outcome", Value: ledger.OutcomeSucceeded},
				{Path: "completed_at", Value: now},
				{Path: "settlement", Value: map[string]any{"reason": "executor_terminal", "settled_by": "workflow_run", "at": now,
					"evidence": map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e", "state": "SUCCEEDED"}}},
				{Path: "sync.last_synced_at", Value: now}, {Path: "sync.last_verdict", Value: "succeeded"},
				{Path: "sync.unknown_since", Value: firestore.Delete}, {Path: "sync.pending_outcome", Value: firestore.Delete},
				{Path: "sync.attempts", Value: a + 1}, {Path: "sync.target", Value: "projects/p/locations/l"},
			})
		}, firestore.MaxAttempts(3))
		if err != nil {
			failed.Add(1)
		}
		return false
	})
	r.elapsed += time.Since(begin)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d raw transactions failed", f, len(refs))
	}
	return nil
}

// interleaved measures the three sides over n rows each, turn by turn on the same emulator: one
// run of the workflow (limit rows), then as many plain and as many equal-work raw transactions,
// first (0, 1 or 2) deciding which side starts the rotation. The emulator's speed drifts for
// minutes as its JIT warms; turns a run long apart cancel the drift that whole rounds measured
// one after the other would give to whichever side went last.
func interleaved(ctx context.Context, e *env, n, conc, first int) (raw, equal *rawSide, flow settled, err error) {
	if raw, err = newRawSide(ctx, n, false); err != nil {
		return nil, nil, settled{}, err
	}
	defer raw.close()
	if equal, err = newRawSide(ctx, n, true); err != nil {
		return nil, nil, settled{}, err
	}
	defer equal.close()
	w, err := newSettling(ctx, e, n, 0, conc, 0)
	if err != nil {
		return nil, nil, settled{}, err
	}
	defer w.close()
	more := true
	turns := []func() error{
		func() (err error) {
			if more {
				more, err = w.run(ctx)
			}
			return err
		},
		func() error { return raw.step(ctx, executionsync.LimitMax, conc) },
		func() error { return equal.step(ctx, executionsync.LimitMax, conc) },
	}
	for more || raw.next < n || equal.next < n {
		for i := range turns {
			if err := turns[(first+i)%len(turns)](); err != nil {
				return nil, nil, settled{}, err
			}
		}
	}
	return raw, equal, w.result(), nil
}

func measureThroughput(ctx context.Context, e *env, p *progress, sz sizes, conc int, res *Result) error {
	// One round to warm the sides, then three, each side first in turn. In a round the sides
	// take turns a run of 200 rows long (interleaved); each side's figure is its median round.
	if _, _, _, err := interleaved(ctx, e, sz.rows, conc, 1); err != nil {
		return err
	}
	const rounds = 3
	var raws, equals, flows, pools, overheads, calls []float64
	var last settled
	for round := range rounds {
		raw, equal, s, err := interleaved(ctx, e, sz.rows, conc, (round+1)%3)
		if err != nil {
			return err
		}
		raws = append(raws, float64(sz.rows)/raw.elapsed.Seconds())
		equals = append(equals, float64(sz.rows)/equal.elapsed.Seconds())
		flows = append(flows, s.perSecond())
		pools = append(pools, float64(s.rows)/s.syncing.Seconds())
		overheads = append(overheads, float64((s.elapsed-s.syncing).Milliseconds())/float64(s.runs))
		calls = append(calls, float64(s.calling.Microseconds())/1000/float64(s.started))
		last = s
		p.say("round %d: raw %.0f tx/s, equal-work raw %.0f tx/s, workflow %.0f rows/s (%d rows each, concurrency %d, taking turns); within the runs' pools %.0f rows/s (a GetExecution %.2f ms), %.0f ms a run outside them",
			round+1, raws[round], equals[round], flows[round], sz.rows, conc, pools[round], calls[round], overheads[round])
	}
	res.RawTxPerS, res.SettleRowsPerS, res.EqualWorkTxPerS = median(raws), median(flows), median(equals)
	res.RawTxPerSRounds, res.SettleRowsPerSRounds, res.EqualWorkTxPerSRounds = raws, flows, equals
	res.SettleThroughputRatio = res.SettleRowsPerS / res.RawTxPerS
	res.SettleVsEqualWorkRatio = res.SettleRowsPerS / res.EqualWorkTxPerS
	res.SettlePoolRowsPerS, res.SettleRunOverheadMs, res.SettleExecutorCallMs = median(pools), median(overheads), median(calls)
	res.SettlePoolRatio = res.SettlePoolRowsPerS / res.RawTxPerS
	p.say("medians: raw %.0f tx/s, equal-work raw %.0f tx/s, workflow %.0f rows/s: ratios %.2f and %.2f (settle_vs_equal_work_ratio)",
		res.RawTxPerS, res.EqualWorkTxPerS, res.SettleRowsPerS, res.SettleThroughputRatio, res.SettleVsEqualWorkRatio)

	s := last
	res.ReadsPerSettledRow = float64(s.reads) / float64(s.rows)
	res.WritesPerSettledRow = float64(s.writes) / float64(s.rows)
	res.QueriesPerRun = float64(s.queries) / float64(s.runs)
	res.ExecutorCallsPerCandidate = float64(s.calls) / float64(s.started)
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// measureCost counts the executor calls a run makes for rows without a provider reference.
func measureCost(ctx context.Context, e *env, p *progress, sz sizes, res *Result) error {
	p.say("reads %.2f, writes %.2f per settled row; %.2f queries per run; %.2f executor calls per candidate",
		res.ReadsPerSettledRow, res.WritesPerSettledRow, res.QueriesPerRun, res.ExecutorCallsPerCandidate)
	s, err := settleRows(ctx, e, 0, min(sz.rows, 200), 8, 0)
	if err != nil {
		return err
	}
	res.ExecutorCallsForMissingMetadata = int(s.calls)
	p.say("%d rows without a provider reference: %d candidates, %d executor calls", min(sz.rows, 200), s.candidates, s.calls)
	return nil
}

func measureConcurrency(ctx context.Context, e *env, p *progress, sz sizes, res *Result) error {
	rate := map[[2]int]float64{}
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		rows := sz.levelRows
		if latency > 0 {
			rows = sz.latencyRows
		}
		for _, c := range []int{1, 4, 16} {
			s, err := settleRows(ctx, e, rows, 0, c, latency)
			if err != nil {
				return err
			}
			pt := Point{Concurrency: c, LatencyMs: int(latency / time.Millisecond), Rows: rows, RowsPerS: s.perSecond()}
			res.ThroughputByConcurrency = append(res.ThroughputByConcurrency, pt)
			rate[[2]int{c, pt.LatencyMs}] = pt.RowsPerS
			p.say("%d rows, concurrency %2d, executor latency %2d ms: %.0f rows/s", rows, c, pt.LatencyMs, pt.RowsPerS)
		}
	}
	res.PoolSpeedupAt50ms = rate[[2]int{16, 50}] / rate[[2]int{1, 50}]
	return nil
}
