package sweeptest

import (
	"context"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// PauseAfterFirst stands in for an operator who pauses a sweep right after its first settling
// transaction returns, and counts the transactions tried. A store wrapper embeds it and calls
// Tried after each transaction it passes on. Safe for concurrent use.
type PauseAfterFirst struct {
	Pause func() // takes the pause; called once, under the lock, before any later Tried returns
	mu    sync.Mutex
	calls int
}

// Tried notes one transaction tried, and pauses after the first.
func (p *PauseAfterFirst) Tried() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls++; p.calls == 1 {
		p.Pause()
	}
}

// Calls is how many transactions were tried.
func (p *PauseAfterFirst) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// DryPaused is what a dry run of RunDryRunPaused previewed of its two rows: its preview, its
// stats' count of rows left to the pause (Paused), and the spy that saw its writes.
type DryPaused struct {
	Preview *explain.Preview
	Paused  int
	Spy     *fsspy.Spy
}

// RunDryRunPaused checks that a dry run of a paused sweep reads the pause as its transactions
// would: its preview leaves both rows to the pause (rule paused, as "keep/paused") and would
// settle (verb, as "abandon") none; told to override the pause it would settle both. Either way
// it writes nothing. It runs, in parallel with t's other tests, two parallel subtests: "paused",
// and "paused; the dry run overrides it". run takes the pause, writes two rows the sweep would
// settle, resets the spy, dry-runs the sweep (DryPreview) and checks its rows are unwritten.
func RunDryRunPaused(t *testing.T, verb, paused string, run func(t *testing.T, override bool) DryPaused) {
	t.Parallel()
	for _, override := range []bool{false, true} {
		t.Run(map[bool]string{false: "paused", true: "paused; the dry run overrides it"}[override], func(t *testing.T) {
			t.Parallel()
			got := run(t, override)
			p := got.Preview
			switch {
			case !override && (p.Rules[paused] != 2 || p.Counts[verb] != 0 || got.Paused != 2):
				t.Errorf("preview %+v, paused %d; want both rows %s", p, got.Paused, paused)
			case override && (p.Counts[verb] != 2 || got.Paused != 0):
				t.Errorf("preview %+v, paused %d; want both rows: %s", p, got.Paused, verb)
			}
			NoWrites(t, got.Spy, "the dry run")
		})
	}
}

// Pause takes p, as an operator would, and fails the test if it cannot.
func Pause(t testing.TB, fs *firestore.Client, p pausestore.Pause) {
	t.Helper()
	if err := pausestore.New(fs).Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// PauseWith is a PauseAfterFirst.Pause that takes the pause pause returns (built when it is
// called, on the clock as it then reads), as an operator would. A failure is t.Error, not
// t.Fatal: it runs inside the sweep's transaction.
func PauseWith(t testing.TB, fs *firestore.Client, pause func() pausestore.Pause) func() {
	return func() {
		if err := pausestore.New(fs).Put(context.Background(), pause()); err != nil {
			t.Error(err)
		}
	}
}

// MidSweep is a case of RunPauseMidSweep: C is the sweep's own (the pause it takes, whether the
// run overrides it), Paused whether that pause stops the run.
type MidSweep[C any] struct {
	Name   string
	Paused bool
	Case   C
}

// Swept is what a run of RunPauseMidSweep did with its three rows: Settled as the rows hold
// them, Listed as its output lists them, Paused its stats' count of rows left to the pause,
// Calls the settling transactions tried (PauseAfterFirst.Calls); Said prints its output and stats.
type Swept struct {
	Settled, Listed, Paused, Calls int
	Said                           string
}

// RunPauseMidSweep checks, once per case, as parallel subtests, that a pause taken right after
// a run's first settling transaction stops the rows the run has not settled: the next
// transaction reads the pause and writes nothing, no further one is tried, and the run counts
// the two rows left paused. A case whose pause does not stop the run settles all three. run takes
// the case's pause with a PauseAfterFirst on its store (one transaction at a time), writes three
// rows the sweep would settle, runs it, and checks what is its own (rows left unwritten).
func RunPauseMidSweep[C any](t *testing.T, cases []MidSweep[C], run func(t *testing.T, c C) Swept) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			got := run(t, c.Case)
			switch {
			case c.Paused && (got.Settled != 1 || got.Listed != 1 || got.Paused != 2 || got.Calls != 2):
				t.Errorf("settled %d, listed %d, paused %d, %d transactions (%s); want 1 settled before the pause, 2 paused, and no transaction after the first paused one",
					got.Settled, got.Listed, got.Paused, got.Calls, got.Said)
			case !c.Paused && (got.Settled != 3 || got.Listed != 3 || got.Paused != 0):
				t.Errorf("settled %d, listed %d, paused %d (%s); want all 3", got.Settled, got.Listed, got.Paused, got.Said)
			}
		})
	}
}
