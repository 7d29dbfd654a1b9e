package executionsync_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// rowWrites counts the committed writes to runner_executions since the spy was last reset.
func (e *env) rowWrites() int {
	n := 0
	for _, w := range e.spy.Writes() {
		if strings.Contains(w.Document, "/"+ledger.ExecutionsCollection+"/") {
			n++
		}
	}
	return n
}

// A run that learns nothing writes nothing: rows unknown to a target that has gone blind are
// written when they turn unknown, and then only once per keep-alive (half the guard's window),
// so that the guard keeps counting them; every other tick writes no row. Past the grace the
// guard, judging on what those writes left, keeps the target blind, and no row is settled lost:
// the lost verdict would still start from unknown_since, the time each row was first unknown.
func TestATickThatLearnsNothingWritesNoRow(t *testing.T) {
	t.Parallel()
	f := newBlindFleet(t, 1, &lines{})
	const n = 12 // above the guard's minimum
	for range n {
		f.row(f.orgs[0], targetA, "blind")
	}
	f.forget(f.rows[targetA]...)
	t0 := f.e.clock.Now()
	keepAlive := blindguard.WindowDefault / 2

	var got, want []string
	for tick := time.Duration(0); tick <= time.Hour; tick += 5 * time.Minute {
		f.e.spy.Reset()
		stats := f.sweep(false)
		writes := f.e.rowWrites()
		wantWrites := 0
		if tick%keepAlive == 0 {
			wantWrites = n // the first sighting, and each keep-alive since
		}
		got = append(got, fmt.Sprintf("t0+%s: %d row writes, %d unknown, %d lost", tick, writes, stats[0].Unknown, f.lost(targetA)))
		want = append(want, fmt.Sprintf("t0+%s: %d row writes, %d unknown, %d lost", tick, wantWrites, n, 0))
		f.e.clock.Advance(5 * time.Minute)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ticks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, id := range f.rows[targetA] {
		if r := f.e.get(id); !r.Sync.UnknownSince.Equal(t0) || !r.Active {
			t.Errorf("row %s: active=%t unknown_since %v, want active, unknown since the first tick %v", id, r.Active, r.Sync.UnknownSince, t0)
		}
	}
}
