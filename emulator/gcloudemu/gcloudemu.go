// Package gcloudemu starts and stops the Google Cloud CLI's local emulators (Firestore, Pub/Sub)
// for the demo, the benchmarks and the tests.
//
// Each emulator runs in its own session and process group on a free loopback port, watched as
// package procgroup says, so a crashed test or an interrupted demo leaves no JVM running.
package gcloudemu

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"github.com/stalesweep/stalesweep/emulator/procgroup"
)

// Emulator is a running emulator this process started.
type Emulator struct {
	// Host is the emulator's host:port on loopback, the value for FIRESTORE_EMULATOR_HOST or
	// PUBSUB_EMULATOR_HOST.
	Host string

	proc *procgroup.Proc
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
	p, err := procgroup.Start(name+" emulator", gcloud, procgroup.Options{LogMax: 64 << 10}, args(host)...)
	if err != nil {
		return nil, err
	}
	e := &Emulator{Host: host, proc: p}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := p.WaitHTTP(ctx, &http.Client{Timeout: 2 * time.Second}, "http://"+host+readyPath, "", readyBody); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("start %s emulator on %s: %w; its output:\n%s", name, host, err, p.Logs())
	}
	return e, nil
}

// Stop ends the emulator's process group and waits until every process of it is gone.
func (e *Emulator) Stop() error { return e.proc.Stop() }

// FreePort returns a TCP port on loopback that was free a moment ago.
func FreePort() (int, error) {
	ports, err := procgroup.FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
