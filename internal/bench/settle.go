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
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fsspy"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// settled is what one settling measurement saw.
type settled struct {
	elapsed                   time.Duration
	rows, started, candidates int
	runs                      int
	reads, writes, queries    int // on runner_executions, counted on the wire
	calls                     int64
}

func (s settled) perSecond() float64 { return float64(s.rows) / s.elapsed.Seconds() }

// settleRows seeds n stale rows whose executions Cloud Run reports succeeded (and missing rows
// without a provider reference), then runs the execution-sync workflow, syncs inline at
// concurrency conc, until every syncable row is settled.
func settleRows(ctx context.Context, e *env, n, missing, conc int, latency time.Duration) (settled, error) {
	spy := fsspy.New()
	fs, done, err := project(ctx, spy)
	if err != nil {
		return settled{}, err
	}
	defer done()
	org := uuid.NewString()
	if err := ledger.NewOrganizationStore(fs).Put(ctx, ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
		return settled{}, err
	}
	old := time.Now().Add(-10 * time.Minute).Truncate(time.Microsecond)
	ids := make([]string, n+missing)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	for i := range n {
		name := cloudrunfake.ExecutionName("bench", "europe-west1", "job", ids[i])
		if err := e.fake.SetExecution(cloudrunfake.Succeeded(name, old)); err != nil {
			return settled{}, err
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
		return settled{}, err
	}
	e.fake.SetLatency(cloudrunfake.GetExecution, latency)
	defer e.fake.SetLatency(cloudrunfake.GetExecution, 0)

	store := ledger.NewExecutionStore(fs, ledger.TxConfig{})
	adapter := cloudrun.New(e.run, cloudrun.Config{})
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun, Concurrency: conc, Budget: 30 * time.Minute}.WithDefaults()
	// As the app builds it: the blind-executor guard on (it reads nothing for rows the executor
	// knows; what it costs a healthy target is the sync.target each answer writes).
	syncer := executionsync.NewSyncer(store, adapter, contract.ExecutionSyncCloudRun, ledger.ProviderCloudRun, time.Now, cfg.LostGrace, logging.Discard()).
		GuardTargets(blindguard.New(ledger.NewTargetStore(fs), blindguard.Config{}, logging.Discard()))
	wf, err := executionsync.New(store, adapter, &executionsync.Inline{Syncer: syncer, Concurrency: conc}, cfg, time.Now)
	if err != nil {
		return settled{}, err
	}
	engine := workflow.NewEngine(workflow.Options{Runs: ledger.NewRunStore(fs), Now: time.Now, Log: logging.Discard()},
		wf.Definition(executionsync.CloudRun))
	input, _ := json.Marshal(map[string]any{"organization_uuid": org, "limit": executionsync.LimitMax})

	spy.Reset()
	calls := e.calls.Load()
	var s settled
	begin := time.Now()
	for s.rows < n {
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: input, Trigger: workflow.TriggerLocal})
		if err != nil {
			return s, err
		}
		if out.Status != workflow.StateCompleted {
			return s, fmt.Errorf("run %s failed: %v", out.RunUUID, out.Err)
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
			break // nothing syncable left (a missing-metadata-only dataset)
		}
		if s.runs > 4*n/executionsync.LimitMax+10 {
			return s, fmt.Errorf("%d runs settled only %d of %d rows", s.runs, s.rows, n)
		}
	}
	s.elapsed = time.Since(begin)
	s.calls = e.calls.Load() - calls
	for _, d := range spy.Reads() {
		if strings.Contains(d, "/"+ledger.ExecutionsCollection+"/") {
			s.reads++
		}
	}
	for _, w := range spy.Writes() {
		if strings.Contains(w.Document, "/"+ledger.ExecutionsCollection+"/") {
			s.writes++
		}
	}
	for _, q := range spy.Queries() {
		if fsspy.Shape(q).Collection == ledger.ExecutionsCollection {
			s.queries++
		}
	}
	return s, nil
}

// rawTransactions makes n single-document read-modify-write transactions, conc at a time, on
// rows shaped like the settled ones: the limit the workflow is measured against.
func rawTransactions(ctx context.Context, n, conc int) (time.Duration, error) {
	fs, done, err := project(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer done()
	refs := make([]*firestore.DocumentRef, n)
	old := time.Now().Add(-10 * time.Minute)
	err = bulk(ctx, fs, n, func(i int) (*firestore.DocumentRef, any) {
		refs[i] = fs.Collection(ledger.ExecutionsCollection).Doc(uuid.NewString())
		return refs[i], ledger.Execution{OrganizationUUID: "raw", Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: old,
			ProviderRef: map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"}}
	})
	if err != nil {
		return 0, err
	}
	var failed atomic.Int64
	begin := time.Now()
	parallel.ForEach(ctx, n, conc, func(i int) bool {
		err := fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			snap, err := tx.Get(refs[i])
			if err != nil {
				return err
			}
			attempts, _ := snap.DataAt("sync.attempts")
			a, _ := attempts.(int64)
			return tx.Update(refs[i], []firestore.Update{{Path: "observed_at", Value: time.Now()}, {Path: "sync.attempts", Value: a + 1}})
		}, firestore.MaxAttempts(3))
		if err != nil {
			failed.Add(1)
		}
		return false
	})
	elapsed := time.Since(begin)
	if f := failed.Load(); f > 0 {
		return elapsed, fmt.Errorf("%d of %d raw transactions failed", f, n)
	}
	return elapsed, nil
}

func measureThroughput(ctx context.Context, e *env, p *progress, sz sizes, conc int, res *Result) error {
	// Warm both sides first, then alternate them round by round, each side first in turn, on the
	// same emulator: neither side is measured cold, nor always second. Each side's figure is its
	// median round.
	if _, err := rawTransactions(ctx, min(sz.rows, 100), conc); err != nil {
		return err
	}
	if _, err := settleRows(ctx, e, min(sz.rows, 100), 0, conc, 0); err != nil {
		return err
	}
	const rounds = 3
	var raws, flows []float64
	var last settled
	for round := range rounds {
		measureRaw := func() error {
			raw, err := rawTransactions(ctx, sz.rows, conc)
			if err != nil {
				return err
			}
			raws = append(raws, float64(sz.rows)/raw.Seconds())
			return nil
		}
		measureFlow := func() error {
			s, err := settleRows(ctx, e, sz.rows, 0, conc, 0)
			if err != nil {
				return err
			}
			flows = append(flows, s.perSecond())
			last = s
			return nil
		}
		first, second := measureRaw, measureFlow
		if round%2 == 1 {
			first, second = measureFlow, measureRaw
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		p.say("round %d: raw %.0f tx/s, workflow %.0f rows/s (%d rows each, concurrency %d)", round+1, raws[round], flows[round], sz.rows, conc)
	}
	res.RawTxPerS, res.SettleRowsPerS = median(raws), median(flows)
	res.RawTxPerSRounds, res.SettleRowsPerSRounds = raws, flows
	res.SettleThroughputRatio = res.SettleRowsPerS / res.RawTxPerS
	p.say("medians: raw %.0f tx/s, workflow %.0f rows/s: ratio %.2f", res.RawTxPerS, res.SettleRowsPerS, res.SettleThroughputRatio)

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
