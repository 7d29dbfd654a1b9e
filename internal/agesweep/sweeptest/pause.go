package sweeptest

import "sync"

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
