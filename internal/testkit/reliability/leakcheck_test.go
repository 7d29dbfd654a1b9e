package reliability_test

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// The goroutine check of the crash trials bites: a goroutine a run leaves behind and a gRPC
// connection a run opens and never closes are both reported, and neither is once it is gone.
// The connections go to the Firestore emulator, whose own goroutines are another process's.
// Not parallel: it sees every goroutine of the process.
func TestTheGoroutineCheckReportsWhatARunLeavesBehind(t *testing.T) {
	if err := awaitConnections(connectionSetupLimit); err != nil {
		t.Fatal(err)
	}
	baseline := goleak.IgnoreCurrent()
	if err := findLeaks(baseline); err != nil {
		t.Fatalf("nothing left behind yet, but: %v", err)
	}

	t.Run("a goroutine", func(t *testing.T) {
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-release })
		err := findLeaks(baseline)
		close(release)
		wg.Wait()
		if err == nil || !strings.Contains(err.Error(), "TestTheGoroutineCheckReportsWhatARunLeavesBehind") {
			t.Errorf("a goroutine blocked on a channel was not reported: %v", err)
		}
		if err := findLeaks(baseline); err != nil {
			t.Errorf("reported after it ended: %v", err)
		}
	})

	t.Run("a connection", func(t *testing.T) {
		conn := dialEmulator(t, nil)
		awaitReady(t, conn)
		err := findLeaks(baseline)
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "(*http2Client).reader") {
			t.Errorf("a gRPC connection left open was not reported: %v", err)
		}
		if err := findLeaks(baseline); err != nil {
			t.Errorf("reported after it was closed: %v", err)
		}
	})
}

// A baseline taken while a connection made before it is still being set up reports that
// connection's writer — started once the server's HTTP/2 preface arrives — as a leak: what made
// CI fail with the Firestore client's own emulator connection. awaitConnections waits for the
// setup, and a baseline taken after it reports nothing.
func TestTheGoroutineBaselineWaitsForConnectionsBeingSetUp(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	conn := dialEmulator(t, gate)
	conn.Connect()
	// The dial is asynchronous; until the gate opens the client cannot read the server's
	// preface, so the handshake cannot end.
	if err := pollUntil(connectionSetupLimit, func() bool { return connecting() > 0 }); err != nil {
		t.Fatalf("the connection never started its setup: %v", err)
	}
	if err := awaitConnections(100 * time.Millisecond); err == nil {
		t.Fatalf("awaitConnections returned while a handshake could not end")
	}
	early := goleak.IgnoreCurrent()

	open()
	if err := awaitConnections(connectionSetupLimit); err != nil {
		t.Fatal(err)
	}
	late := goleak.IgnoreCurrent()
	awaitReady(t, conn)

	if err := findLeaks(early); err == nil || !strings.Contains(err.Error(), "(*loopyWriter).run") {
		t.Errorf("a baseline taken during the handshake should miss the connection's writer: %v", err)
	}
	if err := findLeaks(late); err != nil {
		t.Errorf("a baseline taken once the setup ended reports a leak: %v", err)
	}
}

// dialEmulator makes a gRPC connection to the Firestore emulator; with gate, nothing the server
// sends is read until gate is closed.
func dialEmulator(t *testing.T, gate <-chan struct{}) *grpc.ClientConn {
	t.Helper()
	testenv.Need(t, testenv.FirestoreEmulator)
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if gate != nil {
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return gatedConn{Conn: c, gate: gate}, nil
		}))
	}
	conn, err := grpc.NewClient("passthrough:///"+os.Getenv(firestoreconn.EmulatorEnv), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// awaitReady connects conn and waits until it is up.
func awaitReady(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectionSetupLimit)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("the connection did not come up: %s", st)
		}
	}
}

// gatedConn holds every read until its gate is closed.
type gatedConn struct {
	net.Conn
	gate <-chan struct{}
}

func (c gatedConn) Read(p []byte) (int, error) {
	<-c.gate
	return c.Conn.Read(p)
}
