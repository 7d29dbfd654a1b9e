package reliability_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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
// as the ones later checks ignore, once no gRPC connection is still being set up.
func (l *lockstep) takeBaseline() {
	if err := awaitConnections(connectionSetupLimit); err != nil {
		l.t.Errorf("the goroutine baseline: %v", err)
	}
	l.baseline = goleak.IgnoreCurrent()
}

// checkLeaks returns a check that no goroutine exists beyond the baseline, to run once every
// member's runs of a phase have returned.
func (l *lockstep) checkLeaks(format string, args ...any) func() {
	return func() {
		l.checks++
		if err := findLeaks(l.baseline); err != nil {
			l.t.Errorf("%s: a goroutine outlived the runs: %v", fmt.Sprintf(format, args...), err)
		}
	}
}

// findLeaks reports the goroutines beyond baseline. goleak.Find itself waits about half a second
// for goroutines on their way out (the handler of a call a cut run abandoned); a loaded machine
// gets a little longer. A leak stays.
func findLeaks(baseline goleak.Option) error {
	var err error
	for range 3 {
		if err = goleak.Find(baseline); err == nil {
			return nil
		}
	}
	return err
}

// connectionSetupLimit bounds the wait for gRPC connections still being set up.
const connectionSetupLimit = 30 * time.Second

// grpcConnecting is in the stack of a goroutine that sets up a gRPC client connection (dial and
// HTTP/2 handshake, or the backoff after a failed attempt); it returns once the connection is
// up, and the connection's own goroutines run from then on.
const grpcConnecting = "google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"

// awaitConnections waits, at most limit, until no gRPC connection of the process is being set
// up. A baseline taken while one is would miss the goroutines the connection starts once the
// server's HTTP/2 preface arrives, and every later check would report them. The Firestore
// client makes such a connection on its own: given FIRESTORE_EMULATOR_HOST it dials the emulator
// eagerly, before firestoreconn.Open's connection replaces it, and nothing ever uses it — on a loaded
// machine its handshake can end after the warm-up calls on the connections the runs use.
func awaitConnections(limit time.Duration) error {
	if err := pollUntil(limit, func() bool { return connecting() == 0 }); err != nil {
		return fmt.Errorf("%d gRPC connection(s) still being set up after %s", connecting(), limit)
	}
	return nil
}

// pollUntil checks cond every 10 ms until it holds, or fails once limit has passed.
func pollUntil(limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not so after %s", limit)
		}
		<-tick.C
	}
	return nil
}

// connecting counts the goroutines setting up a gRPC connection.
func connecting() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, grpcConnecting) {
			count++
		}
	}
	return count
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
