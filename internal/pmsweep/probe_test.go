package pmsweep_test

import (
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

// A queue has work exactly when its least recently active working task is silent for the TTL,
// or cannot be read.
func TestTheProbeFindsASilentTask(t *testing.T) {
	for _, c := range []struct {
		name string
		put  func(s *memstore.Tasks)
		want bool
	}{
		{name: "no tasks", put: func(*memstore.Tasks) {}, want: false},
		{name: "working, recently active", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-59 * time.Second)})
		}, want: false},
		{name: "working, silent for the TTL", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-60 * time.Second)})
		}, want: true},
		{name: "silent but done", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskDone, LastActivityAt: epoch.Add(-time.Hour)})
		}, want: false},
		{name: "silent in another queue", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "other", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch.Add(-time.Hour)})
		}, want: false},
		{name: "unreadable", put: func(s *memstore.Tasks) {
			s.Put(ledger.Task{Queue: "q", ID: "a", Status: ledger.TaskWorking, LastActivityAt: epoch, Malformed: "x"})
		}, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewTasks()
			c.put(s)
			sweeptest.Probe(t, pmsweep.New(s, pmsweep.Config{}, ledgertest.LocalClock(func() time.Time { return epoch })).Definition(),
				pmsweep.Input{Queue: "q", TTL: 60}, epoch, c.want)
		})
	}
}
