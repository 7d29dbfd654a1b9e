package kubeapiserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server process in its own session and process group, watched by a watchdog.
type proc struct {
	name     string
	cmd      *exec.Cmd
	watchdog *exec.Cmd
	pgid     int
	done     chan struct{}
	logs     *tail

	stopOnce sync.Once
	stopErr  error
}

// startProc starts path with args in dir, its output kept in a bounded buffer. If cleanup is
// not empty, the watchdog removes that directory once it has ended the group.
func startProc(name, path, dir, cleanup string, args ...string) (*proc, error) {
	p := &proc{name: name, done: make(chan struct{}), logs: &tail{max: 256 << 10}}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	// A session leader of its own, so its group id is its pid and Stop can signal the group.
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
	// binary that panicked or was killed by -timeout), and exits by itself once the group is
	// gone. `kill -0 -PGID` is the form dash's builtin kill accepts.
	script := fmt.Sprintf(
		`while kill -0 %d 2>/dev/null && kill -0 -%d 2>/dev/null; do sleep 1; done; kill -TERM -%d 2>/dev/null`,
		os.Getpid(), p.pgid, p.pgid)
	if cleanup != "" {
		script += fmt.Sprintf(`; while kill -0 -%d 2>/dev/null; do sleep 1; done; rm -rf '%s'`,
			p.pgid, strings.ReplaceAll(cleanup, `'`, `'\''`))
	}
	p.watchdog = exec.Command("/bin/sh", "-c", script)
	p.watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.watchdog.Start(); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("start %s watchdog: %w", name, err)
	}
	go func() { _ = p.watchdog.Wait() }()
	return p, nil
}

// stop ends the process group with SIGTERM (SIGKILL after 15s) and waits until all of it is gone.
func (p *proc) stop() error {
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

// groupAlive reports whether any process of group pgid is alive.
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }

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

// last returns at most the last n bytes written.
func (t *tail) last(n int) string {
	s := t.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
