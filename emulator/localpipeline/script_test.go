package localpipeline

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// The local script is what the operations guide tells people to run; CI runs it too, in its
// check mode: a tick published with gcloud must settle a stale row through the whole chain.
func TestLocalPipelineScriptSettlesARowThroughTheWholeChain(t *testing.T) {
	testenv.Need(t, testenv.Gcloud+" and its Firestore and Pub/Sub emulators")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../local-pipeline.sh", "--check")
	// Out of time, the script is asked to stop (SIGTERM), so its trap stops the emulators it
	// started in their own sessions; killed outright, it would leave them running.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("local-pipeline.sh --check: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// A port something already listens on — someone else's emulator, say — is refused, naming the
// variable, before anything starts.
func TestLocalPipelineScriptRefusesAPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../local-pipeline.sh", "--check")
	cmd.Env = append(os.Environ(), "FIRESTORE_PORT="+port)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "FIRESTORE_PORT="+port) {
		t.Errorf("exit %v, output %s; want exit 2 naming FIRESTORE_PORT", err, out)
	}
}
