package main

import (
	be "encoding/binary"
	"io"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
)

// freezer is a TCP proxy in front of Firestore that forwards the first `answered` gRPC calls a
// process makes and then freezes: from the HEADERS frame that opens the next call on, it
// forwards nothing in either direction and keeps every connection open. A Firestore that answers
// the command's first read (the opener's) and then hangs mid-command.
type freezer struct {
	target   string
	answered int32
	streams  atomic.Int32 // calls opened so far, over every connection
	frozen   chan struct{}
	once     sync.Once
}

// http2Preface opens every HTTP/2 connection a client makes.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// freezing starts a freezer on loopback and returns its address.
func freezing(t *testing.T, target string, answered int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{target: target, answered: int32(answered), frozen: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { f.clientToServer(c, s) })
			wg.Go(func() { f.copyUntilFrozen(s, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// freeze stops all forwarding, for good.
func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

func (f *freezer) isFrozen() bool {
	select {
	case <-f.frozen:
		return true
	default:
		return false
	}
}

// clientToServer forwards the client's HTTP/2 frames one by one, counting the frames that open
// a call (HEADERS on a stream not seen before), and freezes at the first call past `answered`.
func (f *freezer) clientToServer(c, s net.Conn) {
	preface := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2Preface {
		return
	}
	if _, err := s.Write(preface); err != nil {
		return
	}
	var last uint32
	header := make([]byte, 9)
	for {
		if _, err := io.ReadFull(c, header); err != nil {
			return
		}
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		frame := make([]byte, 9+length)
		copy(frame, header)
		if _, err := io.ReadFull(c, frame[9:]); err != nil {
			return
		}
		const headersFrame = 0x1
		if stream := be.BigEndian.Uint32(header[5:9]) &^ (1 << 31); header[3] == headersFrame && stream > last {
			last = stream
			if f.streams.Add(1) > f.answered {
				f.freeze()
			}
		}
		if f.isFrozen() {
			continue // dropped, as is every later frame: the connection stays open
		}
		if _, err := s.Write(frame); err != nil {
			return
		}
	}
}

// copyUntilFrozen forwards the server's bytes until the freeze, then drops them.
func (f *freezer) copyUntilFrozen(s, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && !f.isFrozen() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// With Firestore answering the opener's first read and then freezing (a black hole, its
// connections left open), every command that needs it exits 1 within its budget — an operator
// command within commandBudgetFactor × STALESWEEP_FIRESTORE_TIMEOUT, a run within its run
// budget plus the time its record writes may take — and says which Firestore stopped answering.
func TestEveryFirestoreCommandEndsWithinItsBudgetWhenFirestoreFreezesMidCommand(t *testing.T) {
	bin := newBinary(t)
	const timeout, runBudget = 5 * time.Second, 6 * time.Second
	fake, _, project := cloudRunWorld(t)
	env := map[string]string{"GOOGLE_CLOUD_PROJECT": project, "STALESWEEP_FIRESTORE_TIMEOUT": timeout.String(),
		"STALESWEEP_RUN_BUDGET": runBudget.String(), "STALESWEEP_CLOUD_RUN_ENDPOINT": fake.Addr}
	results := atOnce(len(firestoreCommands), func(i int) result {
		// Each command has its own freezer: it answers that process's first call only.
		e := maps.Clone(env)
		e["FIRESTORE_EMULATOR_HOST"] = freezing(t, os.Getenv(firestoreconn.EmulatorEnv), 1)
		return bin.run(e, firestoreCommands[i]...)
	})
	cfg, err := app.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		args := firestoreCommands[i]
		name := args[0]
		if name == "pm" {
			name = "pm sweep"
		}
		// A run's record writes are detached from its budget, so that a run whose budget is spent
		// still records how it ended: the start's read-back and the final write and its read-back.
		limit := commandBudget(name, cfg) + 2*time.Second
		if runsWorkflow(args) {
			limit += 3 * timeout // workflow.Options.RecordTimeout: the start's read-back, the end and its read-back
		}
		t.Logf("stalesweep %v: exit %d after %s (budget %s)\n%s", args, r.code, r.took.Round(time.Millisecond), limit, r.stderr)
		switch {
		case r.err != nil:
			t.Errorf("stalesweep %v: %v", args, r.err)
		case r.code != exitFailed || r.took > limit:
			t.Errorf("stalesweep %v: exit %d after %s, want %d within %s\n%s", args, r.code, r.took.Round(time.Millisecond), exitFailed, limit, r.stderr)
		case !strings.Contains(r.stderr, "stopped answering"):
			t.Errorf("stalesweep %v: stderr %q, want it to say Firestore stopped answering", args, r.stderr)
		}
	}
}

// runsWorkflow reports whether args start a workflow run (bounded by its run budget).
func runsWorkflow(args []string) bool { return args[0] == "run" || args[0] == "pm" }
