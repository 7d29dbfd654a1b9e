package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The command as an operator runs it: the built binary, its exit code, its streams, and how
// long it took.

// built is the binary, built once per test process by newBinary and removed by TestMain.
var built struct {
	once      sync.Once
	dir, path string
	out       []byte
	err       error
}

// removingBinary runs the tests, then removes the binary they built.
type removingBinary struct{ m *testing.M }

func (r removingBinary) Run() int {
	code := r.m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}

// binary is the built command with an empty home (no gcloud account, no Application Default
// Credentials): what it reads is the environment each run is given, nothing else.
type binary struct{ path, home string }

func newBinary(t *testing.T) binary {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command")
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "stalesweep-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "stalesweep")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return binary{path: built.path, home: t.TempDir()}
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
	err            error // the binary could not be run, or ran past runLimit
}

// runLimit ends a run that hangs, so that a test reports it instead of hanging too.
const runLimit = 2 * time.Minute

// run runs the binary with args and exactly env (plus PATH and the empty home); safe to call
// from several goroutines.
func (b binary) run(env map[string]string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.home, "CLOUDSDK_CONFIG=" + b.home}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{took: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.err = errors.New("still running after " + runLimit.String())
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.err = err
	}
	return r
}

// runAll runs each of argss at once, each with env; the results in argss' order.
func (b binary) runAll(env map[string]string, argss [][]string) []result {
	return atOnce(len(argss), func(i int) result { return b.run(env, argss[i]...) })
}

// atOnceMax is how many binaries atOnce runs together: every command of firestoreCommands, so
// that the bound the unreachable test holds them to is not spent waiting for a turn.
const atOnceMax = 17

// atOnce runs f(0), ..., f(n-1), up to atOnceMax at a time; the results in that order.
func atOnce(n int, f func(i int) result) []result {
	results := make([]result, n)
	slots := make(chan struct{}, atOnceMax)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i] = f(i)
		})
	}
	wg.Wait()
	return results
}

// firestoreCommands is one invocation of every command that reaches the configured Firestore,
// each with arguments it accepts, so that it gets as far as Firestore.
var firestoreCommands = [][]string{
	{"run", "runner.execution-sync-stale-cloud-run", "--data", `{"organization_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e"}`},
	{"pm", "sweep", "--queue", "default", "--ttl", "300", "--dry-run"},
	{"explain", "runner_executions/row-1"},
	{"explain", "tasks/default/t-7"},
	{"gc", "--dry-run"},
	{"pause", "pm.sweep", "--reason", "test"},
	{"resume", "pm.sweep"},
	{"pauses", "list"},
	{"runs", "list"},
	{"runs", "show", "3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64"},
	{"runs", "abandon", "3f2b8c1e-6a4d-4e59-9b1f-7c0d2e8a5f64", "--reason", "test"},
	{"executors", "list"},
	{"executors", "clear", "cloud_run:projects/p/locations/l"},
	{"orgs", "enable", "0f8fad5b-d9cb-469f-a165-70867728950e"},
	{"orgs", "disable", "0f8fad5b-d9cb-469f-a165-70867728950e"},
	{"orgs", "list"},
	{"status"},
}

// offlineCommands reach no configured Firestore: they start their own emulators (demo, bench),
// serve (serve, fake-cloudrun: serve builds its dependencies on the first request), or read and
// write files.
var offlineCommands = []string{"alerts", "bench", "completion bash", "completion fish", "completion powershell", "completion zsh",
	"demo", "fake-cloudrun", "help", "indexes", "serve", "settings", "sinks", "version"}

// Every runnable command of the tree is either listed in firestoreCommands, and so held to the
// bound below, or declared offline: a new command cannot escape the test by being forgotten.
func TestEveryCommandIsKnownToReachFirestoreOrNot(t *testing.T) {
	root := (&cli{ctx: context.Background()}).root()
	listed := map[string]bool{}
	for _, args := range firestoreCommands {
		cmd, _, err := root.Find(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		listed[strings.TrimPrefix(cmd.CommandPath(), "stalesweep ")] = true
	}
	for _, cmd := range commands(root) {
		path := strings.TrimPrefix(cmd.CommandPath(), "stalesweep ")
		if !cmd.Runnable() || cmd.HasSubCommands() || listed[path] || slices.Contains(offlineCommands, path) {
			continue
		}
		t.Errorf("command %q is neither in firestoreCommands nor in offlineCommands: say whether it reaches Firestore", path)
	}
}

// frozen listens on loopback and accepts every connection, then never answers: a Firestore
// that hangs. closing accepts and closes each connection at once.
func frozen(t *testing.T, closeEach bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if closeEach {
				conn.Close()
				continue
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().String()
}

// With Firestore refused, frozen (connections accepted, never answered) or closing every
// connection, every command that needs it exits 1 within a few times STALESWEEP_FIRESTORE_TIMEOUT,
// saying that Firestore at that address is unreachable.
func TestEveryFirestoreCommandEndsWithinTheBoundWhenFirestoreIsUnreachable(t *testing.T) {
	bin := newBinary(t)
	const timeout = 2 * time.Second
	for _, s := range []struct{ name, addr, says string }{
		{"refused", "127.0.0.1:1", "connection refused"},
		{"frozen", frozen(t, false), "accepts connections but did not answer"},
		{"closing", frozen(t, true), "accepts connections but did not answer"},
	} {
		t.Run(s.name, func(t *testing.T) {
			env := map[string]string{"FIRESTORE_EMULATOR_HOST": s.addr, "STALESWEEP_FIRESTORE_TIMEOUT": timeout.String(),
				"STALESWEEP_CLOUD_RUN_ENDPOINT": "127.0.0.1:1"}
			for i, r := range bin.runAll(env, firestoreCommands) {
				args := firestoreCommands[i]
				switch {
				case r.err != nil:
					t.Errorf("stalesweep %v: %v", args, r.err)
				case r.code != exitFailed || r.took > 3*timeout:
					t.Errorf("stalesweep %v: exit %d after %s, want %d within %s\n%s", args, r.code, r.took.Round(time.Millisecond), exitFailed, 3*timeout, r.stderr)
				case !strings.Contains(r.stderr, "Firestore at "+s.addr+" unreachable (after "+timeout.String()) || !strings.Contains(r.stderr, s.says):
					t.Errorf("stalesweep %v: stderr %q, want it to say Firestore at %s is unreachable: %s", args, r.stderr, s.addr, s.says)
				}
			}
		})
	}
}
