package sweeptest

import (
	"context"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
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

// EachOverride runs body as two parallel subtests of a paused sweep's dry run: "paused", and
// "paused; the dry run overrides it", told to override the pause.
func EachOverride(t *testing.T, body func(t *testing.T, override bool)) {
	t.Helper()
	for _, override := range []bool{false, true} {
		t.Run(map[bool]string{false: "paused", true: "paused; the dry run overrides it"}[override], func(t *testing.T) {
			t.Parallel()
			body(t, override)
		})
	}
}

// Pause takes p, as an operator would, and fails the test if it cannot.
func Pause(t testing.TB, fs *firestore.Client, p ledger.Pause) {
	t.Helper()
	if err := pausestore.New(fs).Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// PauseWith is a PauseAfterFirst.Pause that takes the pause pause returns (built when it is
// called, on the clock as it then reads), as an operator would. A failure is t.Error, not
// t.Fatal: it runs inside the sweep's transaction.
func PauseWith(t testing.TB, fs *firestore.Client, pause func() ledger.Pause) func() {
	return func() {
		if err := pausestore.New(fs).Put(context.Background(), pause()); err != nil {
			t.Error(err)
		}
	}
}
