// Package procgroup runs a local server process — an emulator, etcd, kube-apiserver — in its own
// session and process group on loopback, next to a watchdog that ends the group when the Go
// process that started it goes away, so a crashed test or an interrupted demo leaves nothing
// running. Stop ends the group by its id and waits until all of it is gone.
package procgroup

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
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a server process this process started, in a group of its own.
type Proc struct {
	name     string
	cmd      *exec.Cmd
	watchdog *exec.Cmd
	wdDone   chan struct{} // closed when the watchdog has exited
	pgid     int
	done     chan struct{}
	logs     *Tail

	stopOnce sync.Once
	stopErr  error
}

// Options says how to start a process.
type Options struct {
	Dir     string // its working directory; empty for this process's
	LogMax  int    // how many bytes of its latest output to keep
	Cleanup string // if not empty, a directory the watchdog removes once it has ended the group
}

// Start starts path with args as the leader of a new session, so its group id is its pid and
// every process it starts stays in that group (gcloud's Python and JVM, for one).
func Start(name, path string, o Options, args ...string) (*Proc, error) {
	p := &Proc{name: name, done: make(chan struct{}), wdDone: make(chan struct{}), logs: &Tail{max: o.LogMax}}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = o.Dir
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.pgid = p.cmd.Process.Pid
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	// The watchdog ends the group when this process goes away without calling Stop (a test
	// binary that panicked or was killed by -timeout, an interrupted demo), and exits by itself
	// once the group is gone. `kill -0 -PGID` is the form dash's builtin kill accepts.
	script := fmt.Sprintf(
		`while kill -0 %d 2>/dev/null && kill -0 -%d 2>/dev/null; do sleep 1; done; kill -TERM -%d 2>/dev/null`,
		os.Getpid(), p.pgid, p.pgid)
	if o.Cleanup != "" {
		script += fmt.Sprintf(`; while kill -0 -%d 2>/dev/null; do sleep 1; done; rm -rf '%s'`,
			p.pgid, strings.ReplaceAll(o.Cleanup, `'`, `'\''`))
	}
	p.watchdog = exec.Command("/bin/sh", "-c", script)
	p.watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.watchdog.Start(); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("start %s watchdog: %w", name, err)
	}
	go func() {
		_ = p.watchdog.Wait()
		close(p.wdDone)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Logs returns the latest output of the process, at most Options.LogMax bytes.
func (p *Proc) Logs() string { return p.logs.String() }

// LastLogs returns at most the last n bytes of its output.
func (p *Proc) LastLogs(n int) string { return p.logs.Last(n) }

// Stop ends the process group with SIGTERM (SIGKILL after 15 s) and waits until all of it is
// gone. It can be called more than once.
func (p *Proc) Stop() error {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
		deadline := time.Now().Add(15 * time.Second)
		for groupAlive(p.pgid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if groupAlive(p.pgid) {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
		<-p.done
		if p.watchdog != nil && p.watchdog.Process != nil {
			_ = p.watchdog.Process.Kill()
		}
		if groupAlive(p.pgid) {
			p.stopErr = fmt.Errorf("stop %s: process group %d still alive", p.name, p.pgid)
		}
	})
	return p.stopErr
}

// Alive reports whether any process of its group is alive.
func (p *Proc) Alive() bool { return groupAlive(p.pgid) }

// groupAlive reports whether any process of group pgid is alive.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

// WaitHTTP polls url until it answers 200 with body in its first 4 KiB, the process exits, or
// ctx ends. A non-empty token is sent as a bearer token.
func (p *Proc) WaitHTTP(ctx context.Context, client *http.Client, url, token, body string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("build request: %w", err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), body) {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready (last answer: %s): %w", last, ctx.Err())
		case <-p.done:
			return errors.New("exited before it was ready")
		case <-tick.C:
		}
	}
}

// FreePorts returns n distinct loopback ports that were free a moment ago: all are held open
// together, so none is handed out twice.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Tail keeps the last bytes written to it, at most its max.
type Tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// Last returns at most the last n bytes written.
func (t *Tail) Last(n int) string {
	s := t.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
