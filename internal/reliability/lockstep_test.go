package reliability_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// lockstep holds the workflows' parallel crash subtests together at the end of each phase of a
// trial, so that a goroutine check — which sees every goroutine of the process — runs only while
// no run is in flight anywhere: the last member to arrive checks, then all go on. A member that
// ends (passes or fails) leaves, so the others never wait for it.
type lockstep struct {
	t *testing.T // the parent test, which goroutine leaks are reported on

	mu       sync.Mutex
	cond     *sync.Cond
	members  int
	arrived  int
	gen      int
	pending  func() // what the last arrival of this generation runs
	baseline goleak.Option
	checks   int
}

func newLockstep(t *testing.T) *lockstep {
	l := &lockstep{t: t}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// join adds a member; call it before the member's t.Parallel.
func (l *lockstep) join() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members++
}

// leave removes a member, releasing the others if they were waiting only for it.
func (l *lockstep) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members--
	if l.arrived > 0 && l.arrived == l.members {
		l.release()
	}
}

// await waits for every member; the last to arrive runs last first.
func (l *lockstep) await(last func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := l.gen
	l.arrived++
	l.pending = last
	if l.arrived == l.members {
		l.release()
		return
	}
	for gen == l.gen {
		l.cond.Wait()
	}
}

func (l *lockstep) release() {
	l.pending()
	l.arrived, l.pending = 0, nil
	l.gen++
	l.cond.Broadcast()
}

// takeBaseline records the goroutines that exist now — the clients', fakes' and tests' own —
// as the ones later checks ignore.
func (l *lockstep) takeBaseline() { l.baseline = goleak.IgnoreCurrent() }

// checkLeaks returns a check that no goroutine exists beyond the baseline, to run once every
// member's runs of a phase have returned.
func (l *lockstep) checkLeaks(format string, args ...any) func() {
	return func() {
		l.checks++
		// Find itself waits about half a second for goroutines on their way out (the handler of
		// a call a cut run abandoned); a loaded machine gets a little longer. A leak stays.
		var err error
		for range 3 {
			if err = goleak.Find(l.baseline); err == nil {
				return
			}
		}
		l.t.Errorf("%s: a goroutine outlived the runs: %v", fmt.Sprintf(format, args...), err)
	}
}

// member reports for one workflow whose trials run on a goroutine of their own: its messages
// name the workflow, and Fatalf ends that goroutine (its deferred leave included), not the test.
type member struct {
	t    *testing.T
	name string
	// record, when set, takes the member's errors instead of the test: a test that shows the
	// trials report a broken workflow collects them.
	record func(msg string)
}

func (m member) Helper() { m.t.Helper() }

func (m member) Logf(format string, args ...any) {
	m.t.Helper()
	m.t.Logf("%s: %s", m.name, fmt.Sprintf(format, args...))
}

func (m member) Errorf(format string, args ...any) {
	m.t.Helper()
	if m.record != nil {
		m.record(fmt.Sprintf(format, args...))
		return
	}
	m.t.Errorf("%s: %s", m.name, fmt.Sprintf(format, args...))
}

func (m member) Fatalf(format string, args ...any) {
	m.t.Helper()
	m.Errorf(format, args...)
	runtime.Goexit()
}
