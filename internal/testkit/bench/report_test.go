package bench

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestChartIsWellFormedSVGWithOneLinePerLatency(t *testing.T) {
	svg := chart([]Point{
		{Concurrency: 1, LatencyMs: 0, RowsPerS: 200}, {Concurrency: 4, LatencyMs: 0, RowsPerS: 380}, {Concurrency: 16, LatencyMs: 0, RowsPerS: 480},
		{Concurrency: 1, LatencyMs: 50, RowsPerS: 17}, {Concurrency: 16, LatencyMs: 50, RowsPerS: 150},
	})
	dec := xml.NewDecoder(bytes.NewReader(svg))
	lines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 || !strings.Contains(string(svg), "executor latency 50 ms") {
		t.Errorf("%d lines in\n%s", lines, svg)
	}
}

func TestGoalsAreJudgedOnTheFigures(t *testing.T) {
	good := Result{SettleThroughputRatio: 0.9, ReadsPerSettledRow: 2, WritesPerSettledRow: 1, ExecutorCallsPerCandidate: 1,
		ScanDocsReadSmall: 10, ScanDocsReadLarge: 10, ScanCostRatio: 1.1, ScanCostRatioVsFloor: 1, PoolSpeedupAt50ms: 9,
		QuietScopeReads: 1, FanoutRatio: 0.8, FleetScopesReached: true, FanoutRatioOverFloor: 0.9, SettleVsEqualWorkRatio: 0.9,
		TimeToTruthMs:    TimeToTruth{Event: Truth{Samples: 100, P50: 300, P99: 5000}},
		EventCostSettled: EventCost{Queries: 1, ExecutorCalls: 1, Commits: 1, BilledReads: 5, Writes: 1},
		EventCostNoRow:   EventCost{BilledReads: 1}}
	for _, g := range goals(good) {
		if !g.Met {
			t.Errorf("%s not met on good figures", g.Name)
		}
	}
	bad := good
	bad.SettleThroughputRatio, bad.ReadsPerSettledRow, bad.ExecutorCallsForMissingMetadata, bad.ScanDocsReadLarge = 0.5, 3, 2, 11
	bad.TimeToTruthMs.Event.P99, bad.EventCostSettled.ExecutorCalls, bad.EventCostNoRow.BilledReads = 5001, 2, 2
	missed := 0
	for _, g := range goals(bad) {
		if !g.Met {
			missed++
		}
	}
	if missed != 7 {
		t.Errorf("%d goals missed on seven bad figures", missed)
	}
	bad.Goals = goals(bad)
	var out bytes.Buffer
	table(&out, bad)
	if !strings.Contains(out.String(), "MISSED") {
		t.Error("the table does not say a goal was missed")
	}
}
