package runssweep_test

import (
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

// The fleet has work exactly when one running invocation is idle past the deadline.
func TestTheProbeFindsAnIdleRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		moved []time.Duration // each running invocation last moved this long before now
		done  bool            // the idle one has finished
		want  bool
	}{
		{name: "no runs", want: false},
		{name: "only fresh runs", moved: []time.Duration{30 * time.Second, 59 * time.Second}, want: false},
		{name: "one idle past the deadline", moved: []time.Duration{30 * time.Second, 61 * time.Second}, want: true},
		{name: "idle but finished", moved: []time.Duration{2 * time.Minute}, done: true, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewExtensionRuns()
			for i, d := range c.moved {
				status := ledger.ExtensionRunning
				if c.done {
					status = ledger.ExtensionSucceeded
				}
				s.Put(ledger.ExtensionRun{RunID: string(rune('a' + i)), Status: status, LastMovedAt: epoch.Add(-d)})
			}
			sweeptest.Probe(t, runssweep.New(s, runssweep.Config{}, ledgertest.LocalClock(func() time.Time { return epoch })).Definition(),
				runssweep.Input{Limit: 10, OlderThanMs: 60000}, epoch, c.want)
		})
	}
}
