package procgroup

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A process that starts children of its own: Stop must end all of them, not only the leader.
func TestStopEndsTheWholeGroupAndCanBeCalledAgain(t *testing.T) {
	p, err := Start("sleepers", "/bin/sh", Options{LogMax: 1 << 10}, "-c", "sleep 300 & sleep 300 & echo started; wait")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Alive() {
		t.Fatal("the group is not alive after Start")
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if p.Alive() {
		t.Error("a process of the group outlived Stop")
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done is not closed after Stop")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

func TestTheWatchdogRemovesTheCleanupDirectoryOnceTheGroupIsGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := Start("sleeper", "/bin/sh", Options{Dir: dir, LogMax: 1 << 10, Cleanup: dir}, "-c", "sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	// End the group as a dead parent's watchdog would, and let the watchdog see it go.
	if err := syscall.Kill(-p.pgid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	select {
	case <-p.wdDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not exit by itself within 30 s of the group ending")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cleanup directory is still there after the group ended: %v", err)
	}
	_ = p.Stop()
}

func TestWaitHTTPWaitsForTheBodyAndGivesUpWhenTheProcessExits(t *testing.T) {
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var early atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ready:
			_, _ = w.Write([]byte("all Ok"))
		default:
			_, _ = w.Write([]byte("starting"))
			if early.Add(1) == 3 {
				cancel() // it has asked again twice: enough waiting
			}
		}
	}))
	defer srv.Close()
	p, err := Start("sleeper", "/bin/sh", Options{LogMax: 1 << 10}, "-c", "sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop() }() // a sleeper it kills: its exit status is the kill
	err = p.WaitHTTP(ctx, srv.Client(), srv.URL, "", "Ok")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("before the body is there: %v, want not ready, cancelled", err)
	}
	if n := early.Load(); n < 3 {
		t.Errorf("gave up after %d answers without the body, want it to ask until cancelled", n)
	}
	close(ready)
	if err := p.WaitHTTP(context.Background(), srv.Client(), srv.URL, "", "Ok"); err != nil {
		t.Fatalf("once the body is there: %v", err)
	}

	q, err := Start("quitter", "/bin/sh", Options{LogMax: 1 << 10}, "-c", "echo bye; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Stop() }() // already exited with 3
	if err := q.WaitHTTP(context.Background(), srv.Client(), srv.URL+"/never", "", "absent"); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("a process that exits: %v, want exited before it was ready", err)
	}
	if !strings.Contains(q.Logs(), "bye") {
		t.Errorf("logs = %q, want its output", q.Logs())
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	tl := NewTail(8)
	_, _ = tl.Write([]byte("0123456789"))
	_, _ = tl.Write([]byte("ab"))
	if got := tl.String(); got != "456789ab" {
		t.Errorf("String = %q, want the last 8 bytes", got)
	}
	if got := tl.Last(3); got != "…9ab" {
		t.Errorf("Last(3) = %q", got)
	}
}
