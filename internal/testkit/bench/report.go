package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
)

// table prints the figures, each with its goal where it has one.
func table(w io.Writer, r Result) {
	goal := map[string]Goal{}
	for _, g := range r.Goals {
		goal[g.Name] = g
	}
	mark := func(name string) string {
		g, ok := goal[name]
		switch {
		case !ok:
			return ""
		case g.Met:
			return "goal " + g.Target + ": met"
		default:
			return "goal " + g.Target + ": MISSED"
		}
	}
	fmt.Fprintf(w, "\n%-38s %14s  %s\n", "figure", "value", "")
	row := func(name, value, note string) { fmt.Fprintf(w, "%-38s %14s  %s\n", name, value, note) }
	row("settle_rows_per_s", fmt.Sprintf("%.0f", r.SettleRowsPerS), fmt.Sprintf("%d rows, concurrency %d", r.Rows, r.Concurrency))
	row("raw_tx_per_s", fmt.Sprintf("%.0f", r.RawTxPerS), "the limit on this machine")
	row("settle_throughput_ratio", fmt.Sprintf("%.2f", r.SettleThroughputRatio), mark("settle_throughput_ratio"))
	row("equal_work_tx_per_s", fmt.Sprintf("%.0f", r.EqualWorkTxPerS), "raw, reading and writing what a settling transaction does")
	row("settle_vs_equal_work_ratio", fmt.Sprintf("%.2f", r.SettleVsEqualWorkRatio), mark("settle_vs_equal_work_ratio"))
	row("settle_pool_ratio", fmt.Sprintf("%.2f", r.SettlePoolRatio), fmt.Sprintf("within the runs' pools: %.0f rows/s against raw", r.SettlePoolRowsPerS))
	row("settle_executor_call_ms", fmt.Sprintf("%.2f", r.SettleExecutorCallMs), "one GetExecution, as a pool's worker waits for it before the row's transaction")
	row("settle_run_overhead_ms", fmt.Sprintf("%.1f", r.SettleRunOverheadMs), "each run outside its pool: guard and record, scan, finish")
	row("reads_per_settled_row", fmt.Sprintf("%.2f", r.ReadsPerSettledRow), mark("reads_per_settled_row"))
	row("writes_per_settled_row", fmt.Sprintf("%.2f", r.WritesPerSettledRow), mark("writes_per_settled_row"))
	row("queries_per_run", fmt.Sprintf("%.2f", r.QueriesPerRun), "")
	row("executor_calls_per_candidate", fmt.Sprintf("%.2f", r.ExecutorCallsPerCandidate), mark("executor_calls_per_candidate"))
	row("executor_calls_for_missing_metadata", fmt.Sprintf("%d", r.ExecutorCallsForMissingMetadata), mark("executor_calls_for_missing_metadata"))
	row("blind_row_writes_per_tick", fmt.Sprint(r.BlindWritesPerTick), fmt.Sprintf("%d rows of a blind target, the tick after they turned unknown (%d writes); past the grace %d (keep-alive), then %d: ", r.BlindRows, r.BlindWritesFirstTick, r.BlindWritesKeepAliveTick, r.BlindWritesAfterKeepAlive)+mark("blind_row_writes_per_tick"))
	row("scan_ms_small", fmt.Sprintf("%.2f", r.ScanMsSmall), fmt.Sprintf("%d non-stale rows", r.ScanRowsSmall))
	row("scan_ms_large", fmt.Sprintf("%.2f", r.ScanMsLarge), fmt.Sprintf("%d non-stale rows", r.ScanRowsLarge))
	row("scan_cost_ratio", fmt.Sprintf("%.2f", r.ScanCostRatio), mark("scan_cost_ratio"))
	row("scan_floor_ratio", fmt.Sprintf("%.2f", r.ScanFloorRatio), "the emulator's simplest query, same collections")
	row("scan_cost_ratio_vs_emulator_floor", fmt.Sprintf("%.2f", r.ScanCostRatioVsFloor), mark("scan_cost_ratio_vs_emulator_floor"))
	row("scan_docs_read_small / _large", fmt.Sprintf("%d / %d", r.ScanDocsReadSmall, r.ScanDocsReadLarge), mark("scan_docs_read equal"))
	for _, pt := range r.ThroughputByConcurrency {
		row(fmt.Sprintf("throughput c=%d latency=%dms", pt.Concurrency, pt.LatencyMs), fmt.Sprintf("%.0f", pt.RowsPerS), fmt.Sprintf("rows/s over %d rows", pt.Rows))
	}
	row("pool_speedup_at_50ms", fmt.Sprintf("%.1f", r.PoolSpeedupAt50ms), mark("pool_speedup_at_50ms"))
	row("fanout_ms", fmt.Sprintf("%.0f", r.FanoutMs), fmt.Sprintf("a tick over %d organizations, %d with a stale row, to the last run record", r.FanoutScopes, r.FanoutStale))
	row("raw_fanout_ms", fmt.Sprintf("%.0f", r.RawFanoutMs), "as many raw messages as scopes with work, pushed and acknowledged")
	row("fleet_100k_scopes_reached", fmt.Sprint(r.FleetScopesReached), fmt.Sprintf("a tick over %d organizations (%d stale), reading the roster: %d Dispatch invocations, %.0f ms", r.FleetOrgs, r.FleetStale, r.FleetInvocations, r.FleetTickMs))
	row("fleet_build_tick_ms", fmt.Sprintf("%.0f", r.FleetBuildTickMs), fmt.Sprintf("the tick before it, listing the fleet and building the roster: %d Dispatch invocations", r.FleetBuildInvocations))
	row("tick_invocations", fmt.Sprint(r.TickInvocations), fmt.Sprintf("Dispatch and one Sweep per scope with work (%d organizations, %d stale)", r.FanoutScopes, r.FanoutStale))
	row("tick_firestore_ops", fmt.Sprint(r.TickFirestoreOps), "billed reads (documents, at least one per query, the clock) and writes of a Dispatch reading the roster")
	row("tick_firestore_ops_roster_build", fmt.Sprint(r.TickRosterBuildFirestoreOps), fmt.Sprintf("the same, of the tick that lists the organizations and builds the roster (one in %d)", r.RosterPeriodTicks))
	row("roster_writes_per_period", fmt.Sprint(r.RosterWritesPerPeriod), fmt.Sprintf("the roster's own writes over those %d ticks: the fleet's, not an organization's", r.RosterPeriodTicks))
	row("quiet_scope_reads_per_tick", fmt.Sprintf("%.3f", r.QuietScopeReads), fmt.Sprintf("its share of the roster, the listing one tick in %d, and the probes: goal <= 1: ", r.RosterPeriodTicks)+met(r.QuietScopeReads <= 1))
	row("quiet_scope_writes_per_tick", fmt.Sprintf("%.2f", r.QuietScopeWrites), "goal 0")
	row("quiet_scope_invocations_per_tick", fmt.Sprintf("%.2f", r.QuietScopeInvocations), "goal 0")
	row("fanout_ratio", fmt.Sprintf("%.2f", r.FanoutRatio), "raw / pipeline (1 = no overhead)")
	row("raw_two_hops_fanout_ms", fmt.Sprintf("%.0f", r.RawTwoHopsMs), "the raw messages behind one hop more, doing nothing at either")
	row("fanout_floor_ratio", fmt.Sprintf("%.2f", r.FanoutFloorRatio), "raw / two hops: the best fanout_ratio a tick through Dispatch could show here")
	row("fanout_ratio_over_floor", fmt.Sprintf("%.2f", r.FanoutRatioOverFloor), mark("fanout_ratio_over_floor"))
	t := r.TimeToTruthMs
	row("time_to_truth_ms event p50 / p99", fmt.Sprintf("%.0f / %.0f", t.Event.P50, t.Event.P99), fmt.Sprintf("%d executions' end entries through ObserveExecution: ", t.Event.Samples)+mark("time_to_truth_ms event p99"))
	row("time_to_truth_ms sweep p50 / p99", fmt.Sprintf("%.0f / %.0f", t.Sweep.P50, t.Sweep.P99), fmt.Sprintf("%d executions, ticks every %d s, min_age_seconds %d", t.Sweep.Samples, t.SweepScheduleS, t.SweepScheduleS))
	c, n := r.EventCostSettled, r.EventCostNoRow
	row("event_cost_settling_entry", fmt.Sprintf("%.0f/%.0f/%.0f", c.Queries, c.ExecutorCalls, c.Commits), fmt.Sprintf("queries/GetExecution/commits (%.0f billed reads, %.0f writes): ", c.BilledReads, c.Writes)+mark("event_cost_settling_entry"))
	row("event_cost_no_row_entry", fmt.Sprintf("%.0f/%.0f/%.0f", n.BilledReads, n.Writes, n.ExecutorCalls), "billed reads/writes/GetExecution: "+mark("event_cost_no_row_entry"))
	row("cold_start_ms", fmt.Sprintf("%.1f", r.ColdStartMs), "functions server, start to first request")
	row("binary_bytes", fmt.Sprintf("%d", r.BinaryBytes), "")
	fmt.Fprintf(w, "%-38s %14.1f\n", "duration_s", r.DurationS)
}

// chart draws rows/s against concurrency, one line per executor latency, as SVG.
func chart(points []Point) []byte {
	const w, h, left, bottom, top, right = 660.0, 340.0, 70.0, 50.0, 40.0, 180.0
	series := map[int][]Point{}
	maxY := 1.0
	for _, p := range points {
		series[p.LatencyMs] = append(series[p.LatencyMs], p)
		maxY = math.Max(maxY, p.RowsPerS)
	}
	maxY = math.Ceil(maxY/50) * 50
	x := func(c int) float64 { return left + (math.Log2(float64(c))/4)*(w-left-right) } // 1..16 on a log scale
	y := func(v float64) float64 { return h - bottom - v/maxY*(h-top-bottom) }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="14">rows settled per second against concurrent syncs</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for _, c := range []int{1, 2, 4, 8, 16} {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(c), h-bottom+18, c)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">concurrent syncs</text>`+"\n", (left+w-right)/2, h-12)
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), w-right, y(v))
	}
	colors := []string{"#1f77b4", "#d62728", "#2ca02c"}
	var lats []int
	for l := range series {
		lats = append(lats, l)
	}
	sort.Ints(lats)
	for i, l := range lats {
		pts := series[l]
		sort.Slice(pts, func(a, b int) bool { return pts[a].Concurrency < pts[b].Concurrency })
		var line bytes.Buffer
		for _, p := range pts {
			fmt.Fprintf(&line, "%.1f,%.1f ", x(p.Concurrency), y(p.RowsPerS))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.Concurrency), y(p.RowsPerS), colors[i%len(colors)])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%.0f</text>`+"\n", x(p.Concurrency), y(p.RowsPerS)-8, colors[i%len(colors)], p.RowsPerS)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", line.String(), colors[i%len(colors)])
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">executor latency %d ms</text>`+"\n", w-right+10, top+20+float64(i)*18, colors[i%len(colors)], l)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
