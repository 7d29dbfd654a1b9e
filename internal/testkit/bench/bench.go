// Package bench is `stalesweep bench`: it measures what settling costs and how fast it goes on
// this machine, always as ratios of two things measured side by side in one run, because the
// machines are shared and noisy. It starts what it needs (the Firestore and Pub/Sub emulators
// unless the environment names them, the Cloud Run fake in process), prints a table with
// progress while it runs, and writes bench.json and a chart of throughput against concurrency.
//
// Measurements (keys of bench.json):
//
//	settle_rows_per_s, raw_tx_per_s, settle_throughput_ratio
//	    N stale rows settled by the execution-sync workflow (inline, fake with no latency) against
//	    N single-document read-modify-write transactions of a bare client, same concurrency.
//	reads_per_settled_row, writes_per_settled_row, queries_per_run,
//	executor_calls_per_candidate, executor_calls_for_missing_metadata
//	    counted by gRPC client interceptors on the Firestore and Cloud Run connections.
//	scan_ms_small, scan_ms_large, scan_cost_ratio, scan_docs_read_small, scan_docs_read_large
//	    one scan with few against many non-stale rows in the organization (and other tenants).
//	throughput_by_concurrency
//	    settle throughput at 1, 4 and 16 concurrent syncs, with no and with 50 ms executor latency.
//	equal_work_tx_per_s, settle_vs_equal_work_ratio
//	    the same turns against bare transactions that read and write what a settling one does.
//	fanout_ms, raw_fanout_ms, fanout_ratio, raw_two_hops_fanout_ms, fanout_floor_ratio,
//	fanout_ratio_over_floor
//	    a tick for many organizations through the Pub/Sub emulator (publish to the last run
//	    record) against raw publish-and-receive of as many messages, and behind one hop more.
//	time_to_truth_ms, event_cost_settling_entry, event_cost_no_row_entry
//	    from an execution's end in the fake to its row read settled, p50 and p99, by the event
//	    path (its end entry through ObserveExecution) and by the sweep at its schedule; what one
//	    entry costs the event path, counted on the wire.
//	blind_rows, blind_row_writes_first_tick, blind_row_writes_per_tick,
//	blind_row_writes_keep_alive_tick, blind_row_writes_after_keep_alive
//	    the writes to runner_executions of ticks over the rows of a target that knows none of
//	    them: the first, the next (it learns nothing), past the grace (held; the keep-alive), after.
//	cold_start_ms, binary_bytes
//	    the functions server (this binary's serve): start to first request served, and size.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// Options sizes a bench run. Zero values take the defaults (or, with Quick, the quick sizes).
type Options struct {
	Rows        int  // rows settled in the throughput measurement (default 2000; quick 300)
	Concurrency int  // syncs in flight, and concurrent raw transactions (default 8)
	Quick       bool // every measurement small enough to finish in under a minute
	Out         io.Writer
	Dir         string // where bench.json and throughput.svg go (default bench-out)
}

type sizes struct {
	rows, scanSmall, scanLarge, otherTenants, levelRows, latencyRows, fanoutScopes, fanoutStale, coldStarts int
	fleetOrgs, fleetStale, fleetShard                                                                       int
	truthEvents, truthSweepRows, truthScheduleS                                                             int
}

func (o Options) sizes() sizes {
	if o.Quick {
		return sizes{rows: cmp.Or(o.Rows, 300), scanSmall: 100, scanLarge: 2000, otherTenants: 500, levelRows: 100,
			latencyRows: 16, fanoutScopes: 60, fanoutStale: 6, coldStarts: 3, fleetOrgs: 2000, fleetStale: 20, fleetShard: 500,
			truthEvents: 20, truthSweepRows: 4, truthScheduleS: 10}
	}
	return sizes{rows: cmp.Or(o.Rows, 2000), scanSmall: 1000, scanLarge: 50000, otherTenants: 5000, levelRows: 400,
		latencyRows: 60, fanoutScopes: 1000, fanoutStale: 10, coldStarts: 11, fleetOrgs: 100000, fleetStale: 100, fleetShard: pipeline.ShardScopesDefault,
		truthEvents: 100, truthSweepRows: 10, truthScheduleS: int(executionsync.MinAgeSecondsDefault)}
}

// Point is one throughput measurement.
type Point struct {
	Concurrency int     `json:"concurrency"`
	LatencyMs   int     `json:"executor_latency_ms"`
	Rows        int     `json:"rows"`
	RowsPerS    float64 `json:"rows_per_s"`
}

// Goal is one figure measured against its goal.
type Goal struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Met    bool   `json:"met"`
}

// Result is bench.json.
type Result struct {
	StartedAt   time.Time `json:"started_at"`
	DurationS   float64   `json:"duration_s"`
	Quick       bool      `json:"quick"`
	Cores       int       `json:"cores"`
	Rows        int       `json:"rows"`
	Concurrency int       `json:"concurrency"`

	SettleRowsPerS float64 `json:"settle_rows_per_s"`
	RawTxPerS      float64 `json:"raw_tx_per_s"`
	// The rounds the medians come from: raw and workflow alternately, each first in turn.
	RawTxPerSRounds       []float64 `json:"raw_tx_per_s_rounds"`
	SettleRowsPerSRounds  []float64 `json:"settle_rows_per_s_rounds"`
	SettleThroughputRatio float64   `json:"settle_throughput_ratio"`
	// The same turns against a bare transaction that reads and writes what a settling one does:
	// the row, its organization and the two pauses read in one GetAll, the row updated with a
	// settlement's fields (raw_tx_per_s reads and writes only the row).
	EqualWorkTxPerS        float64   `json:"equal_work_tx_per_s"`
	EqualWorkTxPerSRounds  []float64 `json:"equal_work_tx_per_s_rounds"`
	SettleVsEqualWorkRatio float64   `json:"settle_vs_equal_work_ratio"`
	// Where the workflow's time goes: rows per second within the runs' pools of syncs (a row's
	// executor call and transaction), and the time of each run outside its pool (the guard and
	// run record, the scan, the finish), medians of the same rounds.
	SettlePoolRowsPerS  float64 `json:"settle_pool_rows_per_s"`
	SettlePoolRatio     float64 `json:"settle_pool_ratio"`
	SettleRunOverheadMs float64 `json:"settle_run_overhead_ms"`
	// The mean time of one GetExecution call as the pool's workers saw it (a row waits for it
	// before its transaction; the raw sides make none), median of the same rounds.
	SettleExecutorCallMs float64 `json:"settle_executor_call_ms"`

	ReadsPerSettledRow              float64 `json:"reads_per_settled_row"`
	WritesPerSettledRow             float64 `json:"writes_per_settled_row"`
	QueriesPerRun                   float64 `json:"queries_per_run"`
	ExecutorCallsPerCandidate       float64 `json:"executor_calls_per_candidate"`
	ExecutorCallsForMissingMetadata int     `json:"executor_calls_for_missing_metadata"`

	ScanMsSmall       float64 `json:"scan_ms_small"`
	ScanMsLarge       float64 `json:"scan_ms_large"`
	ScanCostRatio     float64 `json:"scan_cost_ratio"`
	ScanDocsReadSmall int     `json:"scan_docs_read_small"`
	ScanDocsReadLarge int     `json:"scan_docs_read_large"`
	ScanRowsSmall     int     `json:"scan_rows_small"`
	ScanRowsLarge     int     `json:"scan_rows_large"`
	// The emulator's floor: its simplest query on the same collections, side by side.
	ScanFloorMsSmall     float64 `json:"scan_floor_ms_small"`
	ScanFloorMsLarge     float64 `json:"scan_floor_ms_large"`
	ScanFloorRatio       float64 `json:"scan_floor_ratio"`
	ScanCostRatioVsFloor float64 `json:"scan_cost_ratio_vs_emulator_floor"`

	ThroughputByConcurrency []Point `json:"throughput_by_concurrency"`
	PoolSpeedupAt50ms       float64 `json:"pool_speedup_at_50ms"`

	FanoutScopes int `json:"fanout_scopes"`
	// FanoutStale is how many of the tick's organizations have a stale row: the others are
	// quiet, and their probes find nothing.
	FanoutStale int `json:"fanout_stale"`
	// Per tick over FanoutScopes organizations of which FanoutStale have work, counted by the
	// gRPC spy on Dispatch's own Firestore client and by what it published.
	TickInvocations  int `json:"tick_invocations_1000_orgs_10_stale"`
	TickFirestoreOps int `json:"tick_firestore_ops_1000_orgs_10_stale"`
	TickMessages     int `json:"tick_messages"`
	// The tick that builds the roster (one in RosterPeriodTicks), and the roster's own writes
	// over that period: the fleet's, not any organization's.
	TickRosterBuildFirestoreOps int     `json:"tick_firestore_ops_roster_build"`
	RosterPeriodTicks           int     `json:"roster_period_ticks"`
	RosterWritesPerPeriod       int     `json:"roster_writes_per_period"`
	QuietScopeReads             float64 `json:"quiet_scope_reads_per_tick"`
	QuietScopeWrites            float64 `json:"quiet_scope_writes_per_tick"`
	QuietScopeInvocations       float64 `json:"quiet_scope_invocations_per_tick"`
	FanoutMs                    float64 `json:"fanout_ms"`
	RawFanoutMs                 float64 `json:"raw_fanout_ms"`
	FanoutRatio                 float64 `json:"fanout_ratio"`
	// The same raw messages behind one hop more (a tick through Dispatch, doing nothing): the
	// best fanout_ratio any tick → Dispatch → Sweep pipeline could show here.
	RawTwoHopsMs     float64 `json:"raw_two_hops_fanout_ms"`
	FanoutFloorRatio float64 `json:"fanout_floor_ratio"`
	// fanout_ratio over fanout_floor_ratio: how close the tick comes to the emulator's floor.
	FanoutRatioOverFloor float64 `json:"fanout_ratio_over_floor"`

	// From an execution's end in the fake to its row read settled, by the event path and by the
	// sweep at its schedule, through the functions served for the fan-out; and what one entry
	// costs the event path, counted on the wire.
	TimeToTruthMs    TimeToTruth `json:"time_to_truth_ms"`
	EventCostSettled EventCost   `json:"event_cost_settling_entry"`
	EventCostNoRow   EventCost   `json:"event_cost_no_row_entry"`

	// One tick over a simulated fleet (100,000 organizations; quick: 2,000), FleetStale of them
	// with a stale row, dispatched with probes and continuations as production does.
	FleetOrgs          int     `json:"fleet_orgs"`
	FleetStale         int     `json:"fleet_stale"`
	FleetInvocations   int     `json:"fleet_dispatch_invocations"`
	FleetTickMs        float64 `json:"fleet_tick_ms"`
	FleetScopesReached bool    `json:"fleet_100k_scopes_reached"`
	// The tick before it, which found no roster: it listed the fleet and built one.
	FleetBuildInvocations int     `json:"fleet_build_dispatch_invocations"`
	FleetBuildTickMs      float64 `json:"fleet_build_tick_ms"`

	// The rows of a Cloud Run target that knows none of its executions, synced tick after tick:
	// row writes of the tick that finds them unknown, of the tick a minute later (it learns
	// nothing: goal 0), of the first tick past the lost grace (the guard holds them; each is
	// written once, its keep-alive for the guard's window), and of the tick a minute after that.
	BlindRows                 int `json:"blind_rows"`
	BlindWritesFirstTick      int `json:"blind_row_writes_first_tick"`
	BlindWritesPerTick        int `json:"blind_row_writes_per_tick"`
	BlindWritesKeepAliveTick  int `json:"blind_row_writes_keep_alive_tick"`
	BlindWritesAfterKeepAlive int `json:"blind_row_writes_after_keep_alive"`

	ColdStartMs float64 `json:"cold_start_ms"`
	BinaryBytes int64   `json:"binary_bytes"`

	Goals []Goal `json:"goals"`
}

// Run runs every measurement and writes DIR/bench.json and DIR/throughput.svg.
func Run(ctx context.Context, o Options) (Result, error) {
	o.Out = cmp.Or[io.Writer](o.Out, io.Discard)
	o.Concurrency = cmp.Or(o.Concurrency, 8)
	o.Dir = cmp.Or(o.Dir, "bench-out")
	sz := o.sizes()
	res := Result{StartedAt: time.Now().UTC(), Quick: o.Quick, Cores: runtime.NumCPU(), Rows: sz.rows, Concurrency: o.Concurrency}
	p := &progress{w: o.Out}

	e, err := start(ctx, p)
	if err != nil {
		return res, err
	}
	defer e.stop(p)

	steps := []struct {
		name string
		run  func() error
	}{
		{"settle throughput against raw transactions", func() error { return measureThroughput(ctx, e, p, sz, o.Concurrency, &res) }},
		{"cost per row", func() error { return measureCost(ctx, e, p, sz, &res) }},
		{"writes per tick for a blind target's rows", func() error { return measureBlind(ctx, e, p, &res) }},
		{"scan cost against collection size", func() error { return measureScan(ctx, e, p, sz, &res) }},
		{"throughput by concurrency", func() error { return measureConcurrency(ctx, e, p, sz, &res) }},
		{"fan-out through Pub/Sub, and time to truth", func() error { return measureFanout(ctx, e, p, sz, &res) }},
		{"one tick over a large fleet", func() error { return measureFleet(ctx, p, sz, &res) }},
		{"cold start and binary size", func() error { return measureColdStart(ctx, p, sz, &res) }},
	}
	for _, s := range steps {
		p.section(s.name)
		if err := s.run(); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	res.Goals = goals(res)
	res.DurationS = time.Since(res.StartedAt).Seconds()
	table(o.Out, res)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return res, err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Dir, "bench.json"), append(b, '\n'), 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "throughput.svg"), chart(res.ThroughputByConcurrency), 0o644); err != nil {
		return res, err
	}
	fmt.Fprintf(o.Out, "\nwrote %s and %s\n", filepath.Join(o.Dir, "bench.json"), filepath.Join(o.Dir, "throughput.svg"))
	return res, nil
}

// goals compares the figures with their goals.
func goals(r Result) []Goal {
	return []Goal{
		{"settle_throughput_ratio", ">= 0.9", r.SettleThroughputRatio >= 0.9},
		{"reads_per_settled_row", "<= 2 (scan + transaction)", r.ReadsPerSettledRow <= 2.0001},
		{"writes_per_settled_row", "<= 1", r.WritesPerSettledRow <= 1.0001},
		{"executor_calls_per_candidate", "1", r.ExecutorCallsPerCandidate > 0.9999 && r.ExecutorCallsPerCandidate < 1.0001},
		{"executor_calls_for_missing_metadata", "0", r.ExecutorCallsForMissingMetadata == 0},
		{"scan_docs_read equal", "small = large", r.ScanDocsReadSmall == r.ScanDocsReadLarge},
		{"scan_cost_ratio", "close to 1 (<= 1.5)", r.ScanCostRatio <= 1.5},
		{"scan_cost_ratio_vs_emulator_floor", "<= 1.5", r.ScanCostRatioVsFloor <= 1.5},
		{"pool_speedup_at_50ms", ">= 4 (16 workers against 1)", r.PoolSpeedupAt50ms >= 4},
		{"blind_row_writes_per_tick", "0", r.BlindWritesPerTick == 0},
		{"quiet_scope_reads_per_tick", "<= 1", r.QuietScopeReads <= 1},
		{"quiet_scope_writes_per_tick", "0", r.QuietScopeWrites == 0},
		{"quiet_scope_invocations_per_tick", "0", r.QuietScopeInvocations == 0},
		{"fanout_ratio", ">= 0.8", r.FanoutRatio >= 0.8},
		{"fanout_ratio_over_floor", ">= 0.9", r.FanoutRatioOverFloor >= 0.9},
		{"settle_vs_equal_work_ratio", ">= 0.9", r.SettleVsEqualWorkRatio >= 0.9},
		{"time_to_truth_ms event p99", "<= 5000", r.TimeToTruthMs.Event.Samples > 0 && r.TimeToTruthMs.Event.P99 <= 5000},
		{"event_cost_settling_entry", "1 query, 1 GetExecution, 1 commit", r.EventCostSettled.Queries == 1 && r.EventCostSettled.ExecutorCalls == 1 && r.EventCostSettled.Commits == 1},
		{"event_cost_no_row_entry", "<= 1 billed read, 0 writes, 0 calls", r.EventCostNoRow.BilledReads <= 1 && r.EventCostNoRow.Writes == 0 && r.EventCostNoRow.ExecutorCalls == 0},
		{"fleet_100k_scopes_reached", "true", r.FleetScopesReached},
	}
}

// progress prints what the bench is doing as it goes.
type progress struct {
	w     io.Writer
	start time.Time
}

func (p *progress) section(name string) {
	p.start = time.Now()
	fmt.Fprintf(p.w, "\n== %s\n", name)
}

func (p *progress) say(format string, args ...any) {
	fmt.Fprintf(p.w, "   %-60s %6.1fs\n", fmt.Sprintf(format, args...), time.Since(p.start).Seconds())
}
