// Package testenv gives tests the real Firestore emulator. A package's TestMain calls Main; each
// test calls Firestore for a client on a project of its own, so tests are isolated by project id
// and may run in parallel against one emulator.
//
// When FIRESTORE_EMULATOR_HOST is set (the test script starts one emulator for every package),
// Main uses it; otherwise Main starts one with gcloud for the package and stops it afterwards.
// Either way a missing emulator is a failure, never a skip: there is no path that runs the
// full suite without it.
//
// The one exception is the fast tier, `go test -short`: there Main starts and requires no
// emulator, and every test that needs one skips, saying which: Firestore and FirestoreProject
// do it, so most tests need no line of their own, and Need does it for a test that reaches an
// emulator, gcloud or another outside process some other way. What the fast tier keeps is the pure
// decision and tally logic, run against in-memory stores (internal/testkit/memstore). CI runs without
// -short, so every skipped test still runs there, against the emulators.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
)

// PubSubEmulatorEnv is the variable the Pub/Sub client follows to the emulator.
const PubSubEmulatorEnv = "PUBSUB_EMULATOR_HOST"

// Option adds a service to Main.
type Option func(*mainConfig)

type mainConfig struct{ pubsub bool }

// WithPubSub also gives the package a Pub/Sub emulator (PUBSUB_EMULATOR_HOST).
func WithPubSub() Option { return func(c *mainConfig) { c.pubsub = true } }

// Main runs the package's tests against a Firestore emulator (and the others opts ask for) and
// exits.
func Main(m Runner, opts ...Option) {
	os.Exit(run(m, opts...))
}

// Runner runs tests: *testing.M, or a wrapper that sets up more before it runs them.
type Runner interface{ Run() int }

func run(m Runner, opts ...Option) int {
	var cfg mainConfig
	for _, o := range opts {
		o(&cfg)
	}
	if !flag.Parsed() {
		flag.Parse() // testing.Short reads the flags, which m.Run would parse only later
	}
	if testing.Short() {
		// The fast tier: nothing is started, and whatever needs an emulator skips (Need).
		return m.Run()
	}
	if os.Getenv(firestoreconn.EmulatorEnv) == "" {
		emu, err := gcloudemu.Firestore(context.Background())
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: these tests need the Firestore emulator and none could be started: %v\n", err)
			return 1
		}
		defer func() { _ = emu.Stop() }() // after the tests: nothing is left to report to
		os.Setenv(firestoreconn.EmulatorEnv, emu.Host)
	}
	if cfg.pubsub && os.Getenv(PubSubEmulatorEnv) == "" {
		emu, err := gcloudemu.PubSub(context.Background(), "stalesweep-test")
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: these tests need the Pub/Sub emulator and none could be started: %v\n", err)
			return 1
		}
		defer func() { _ = emu.Stop() }() // after the tests: nothing is left to report to
		os.Setenv(PubSubEmulatorEnv, emu.Host)
	}
	return m.Run()
}

// Services a test may need that the fast tier (-short) does not have.
const (
	FirestoreEmulator = "Firestore emulator"
	PubSubEmulator    = "Pub/Sub emulator"
	KubeAPIServer     = "real kube-apiserver and etcd"
	Gcloud            = "Google Cloud CLI (gcloud)"
)

// Need skips t in the fast tier (-short) when it needs service, one of the constants above or
// any other outside process. Without -short it does nothing: a missing service is then the
// test's failure, never a skip.
func Need(t testing.TB, service string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs the %s: not in the -short tier", service)
	}
}

// Project returns a fresh project id.
func Project() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

// Firestore returns a client on a new, empty project, closed and cleared when t ends. Extra
// dial options (a spy's interceptors) apply to its connection.
func Firestore(t testing.TB, dial ...grpc.DialOption) *firestore.Client {
	t.Helper()
	return FirestoreProject(t, Project(), dial...)
}

// FirestoreProject is Firestore on a given project, for a second client on the same data.
func FirestoreProject(t testing.TB, project string, dial ...grpc.DialOption) *firestore.Client {
	t.Helper()
	Need(t, FirestoreEmulator)
	host := os.Getenv(firestoreconn.EmulatorEnv)
	if host == "" {
		t.Fatalf("%s is not set: the package's TestMain must call testenv.Main", firestoreconn.EmulatorEnv)
	}
	c, err := firestoreconn.Open(context.Background(), firestoreconn.Options{Project: project, DialOptions: dial})
	if err != nil {
		t.Fatalf("open firestore emulator: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		Clear(t, project)
	})
	return c
}

// Clear deletes every document of project in the emulator.
func Clear(t testing.TB, project string) {
	host := os.Getenv(firestoreconn.EmulatorEnv)
	url := fmt.Sprintf("http://%s/emulator/v1/projects/%s/databases/(default)/documents", host, project)
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Logf("clear emulator project %s: %v", project, err)
		return
	}
	resp.Body.Close()
}

// FreeAddr returns a loopback address nothing listens on: a port taken, then closed.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Fixed returns a clock that always says at.
func Fixed(at time.Time) func() time.Time { return func() time.Time { return at } }

// Clock is a clock a test moves by hand.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading at.
func NewClock(at time.Time) *Clock { return &Clock{t: at} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Decode reads v — a run's output or stats, as the engine hands them on — into dst through JSON,
// as a reader of the run record would, and fails the test when v does not fit dst.
func Decode(t testing.TB, v, dst any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		t.Fatalf("decode %s into %T: %v", b, dst, err)
	}
}

// DecodeRun decodes a run's output and stats (Decode, the output first) into an O and an S.
func DecodeRun[O, S any](t testing.TB, output, stats any) (O, S) {
	t.Helper()
	var o O
	var s S
	Decode(t, output, &o)
	Decode(t, stats, &s)
	return o, s
}

// Unchanged fails the test unless the document at path is as it was written: never updated since
// it was created. what names it in the failure ("invisible task").
func Unchanged(t testing.TB, fs *firestore.Client, what, path string) {
	t.Helper()
	snap, err := fs.Doc(path).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.UpdateTime != snap.CreateTime {
		t.Errorf("%s %s changed: %v", what, snap.Ref.ID, snap.Data())
	}
}

// Enable writes organizations/{org} with sweeps enabled, as the platform does for an
// organization that has not opted out: every per-row transaction reads it.
func Enable(t testing.TB, fs *firestore.Client, orgs ...string) {
	t.Helper()
	store := ledgertest.Organizations{Client: fs}
	for _, org := range orgs {
		if err := store.Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
			t.Fatalf("enable organization %s: %v", org, err)
		}
	}
}

// Unstamped lists what a foreign writer may leave in a staleness field instead of a timestamp:
// nothing (nil: the field missing), a string, a number. No scan can read any as a time.
var Unstamped = []any{nil, "2026-11-29T08:00:00Z", int64(1764403200)}

// PutStamped writes doc at path (relative to the database) with field set to v, or without
// field when v is nil.
func PutStamped(t testing.TB, fs *firestore.Client, path string, doc map[string]any, field string, v any) {
	t.Helper()
	d := make(map[string]any, len(doc)+1)
	for k, x := range doc {
		d[k] = x
	}
	if v != nil {
		d[field] = v
	}
	if _, err := fs.Doc(path).Set(context.Background(), d); err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
}
