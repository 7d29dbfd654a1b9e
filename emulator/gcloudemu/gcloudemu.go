// Package gcloudemu starts and stops the Google Cloud CLI's local emulators (Firestore, Pub/Sub)
// for the demo, the benchmarks and the tests.
//
// Each emulator runs in its own session and process group on a free loopback port, next to a
// watchdog that ends the group when the Go process that started it goes away, so a crashed test
// or an interrupted demo leaves no JVM running. Stop ends the group by its id and waits for it.
package gcloudemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Emulator is a running emulator this process started.
type Emulator struct {
	// Host is the emulator's host:port on loopback, the value for FIRESTORE_EMULATOR_HOST or
	// PUBSUB_EMULATOR_HOST.
	Host string

	cmd      *exec.Cmd
	watchdog *exec.Cmd
	pgid     int
	done     chan struct{}
	logs     *tail

	stopOnce sync.Once
	stopErr  error
}

// StartTimeout bounds how long Start waits for an emulator to answer.
const StartTimeout = 90 * time.Second

// Firestore starts the Firestore emulator (native mode).
func Firestore(ctx context.Context) (*Emulator, error) {
	return start(ctx, "firestore", func(hostPort string) []string {
		return []string{"emulators", "firestore", "start", "--host-port=" + hostPort, "--quiet"}
	}, "/", "Ok")
}

// PubSub starts the Pub/Sub emulator for project.
func PubSub(ctx context.Context, project string) (*Emulator, error) {
	return start(ctx, "pubsub", func(hostPort string) []string {
		return []string{"beta", "emulators", "pubsub", "start", "--host-port=" + hostPort, "--project=" + project, "--quiet"}
	}, "/", "Ok")
}

func start(ctx context.Context, name string, args func(hostPort string) []string, readyPath, readyBody string) (*Emulator, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return nil, fmt.Errorf("start %s emulator: gcloud not found on PATH: install the Google Cloud CLI with its %s emulator component", name, name)
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("start %s emulator: %w", name, err)
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	// gcloud runs as a session leader, so it keeps every process it starts (its Python, the
	// emulator's script, the JVM) in its own process group, whose id is its pid: Stop signals
	// that group. (Not a session leader, gcloud would move itself to a new group on its own.)
	e := &Emulator{Host: host, done: make(chan struct{}), logs: &tail{max: 64 << 10}}
	e.cmd = exec.Command(gcloud, args(host)...)
	e.cmd.Stdout = e.logs
	e.cmd.Stderr = e.logs
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	e.cmd.WaitDelay = 5 * time.Second
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s emulator: %w", name, err)
	}
	e.pgid = e.cmd.Process.Pid
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	// The watchdog ends the group when this process goes away without calling Stop (a test
	// binary that panicked, an interrupted demo), and exits by itself once the group is gone.
	e.watchdog = exec.Command("/bin/sh", "-c", fmt.Sprintf(
		`while kill -0 %d 2>/dev/null && kill -0 -%d 2>/dev/null; do sleep 1; done; kill -TERM -%d 2>/dev/null`,
		os.Getpid(), e.pgid, e.pgid))
	e.watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := e.watchdog.Start(); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("start %s emulator watchdog: %w", name, err)
	}
	go func() { _ = e.watchdog.Wait() }()

	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := waitReady(ctx, e.done, "http://"+host+readyPath, readyBody); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("start %s emulator on %s: %w; its output:\n%s", name, host, err, e.logs.String())
	}
	return e, nil
}

func waitReady(ctx context.Context, exited <-chan struct{}, url, body string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), body) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-exited:
			return errors.New("exited before it was ready")
		case <-tick.C:
		}
	}
}

// Stop ends the emulator's process group and waits until every process of it is gone.
func (e *Emulator) Stop() error {
	e.stopOnce.Do(func() {
		_ = syscall.Kill(-e.pgid, syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for groupAlive(e.pgid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if groupAlive(e.pgid) {
			_ = syscall.Kill(-e.pgid, syscall.SIGKILL)
		}
		<-e.done
		if e.watchdog != nil && e.watchdog.Process != nil {
			_ = e.watchdog.Process.Kill()
		}
		if groupAlive(e.pgid) {
			e.stopErr = fmt.Errorf("stop emulator: process group %d still alive", e.pgid)
		}
	})
	return e.stopErr
}

// groupAlive reports whether any process of group pgid is alive.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// Logs returns the last output of the emulator.
func (e *Emulator) Logs() string { return e.logs.String() }

// FreePort returns a TCP port on loopback that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
