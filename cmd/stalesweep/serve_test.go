package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// serve checks every setting the served targets read before it serves anything, and exits 2
// naming the variable.
func TestServeRefusesABadSettingBeforeServingNamingIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		addr string
		want string
	}{
		{"auth off on every interface", map[string]string{"STALESWEEP_AUTH": "off"}, "0.0.0.0:0", "loopback"},
		{"auth off on every IPv6 interface", map[string]string{"STALESWEEP_AUTH": "off"}, "[::]:0", "loopback"},
		{"auth off on a host name", map[string]string{"STALESWEEP_AUTH": "off"}, "example.com:0", "loopback"},
		{"auth off on Cloud Run", map[string]string{"STALESWEEP_AUTH": "off", "K_SERVICE": "stalesweep"}, "127.0.0.1:0", "K_SERVICE"},
		{"auth mode in capitals", map[string]string{"STALESWEEP_AUTH": "OFF"}, "127.0.0.1:0", "STALESWEEP_AUTH"},
		{"a log level that is none", map[string]string{"STALESWEEP_AUTH": "off", "STALESWEEP_LOG_LEVEL": "bogus"}, "127.0.0.1:0", "STALESWEEP_LOG_LEVEL"},
		{"authentication without an audience", map[string]string{}, "127.0.0.1:0", "STALESWEEP_AUTH_AUDIENCE"},
		{"the audience taken from the request", map[string]string{"STALESWEEP_AUTH_AUDIENCE": "request"}, "127.0.0.1:0", "STALESWEEP_AUTH_AUDIENCE"},
		{"clusters that do not parse", map[string]string{"STALESWEEP_AUTH": "off", "STALESWEEP_KUBE_CLUSTERS": "{"}, "127.0.0.1:0", "STALESWEEP_KUBE_CLUSTERS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"STALESWEEP_AUTH", "STALESWEEP_AUTH_AUDIENCE", "STALESWEEP_LOG_LEVEL", "K_SERVICE", "STALESWEEP_KUBE_CLUSTERS"} {
				t.Setenv(k, tc.env[k])
			}
			// A check that let serve start would serve until the context ends: then it exits 0.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var stdout, stderrBuf strings.Builder
			code := run(ctx, []string{"serve", "--addr", tc.addr}, strings.NewReader(""), &stdout, &stderrBuf)
			stderr := stderrBuf.String()
			if code != exitInvalid || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %s", code, stderr, exitInvalid, tc.want)
			}
		})
	}
}

// The README's local command, run as a new user would: no Pub/Sub emulator, no credentials.
// StartWorkflow needs Firestore and the executor only; anything but POST gets 405 before a
// dependency is built (the Firestore address it would use goes unasked).
func TestServeAsTheReadmeRunsItServesStartWorkflowWithoutPubSubOrCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	fake, fs, project := cloudRunWorld(t)
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	staleRow(t, fs, fake, org, "row-1", cloudrunfake.Succeeded)

	dir := t.TempDir()
	bin := filepath.Join(dir, "stalesweep")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := testenv.FreeAddr(t)
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CLOUDSDK_CONFIG=" + home,
		"STALESWEEP_AUTH=off", "GOOGLE_CLOUD_PROJECT=" + project,
		"FIRESTORE_EMULATOR_HOST=" + os.Getenv(firestoreconn.EmulatorEnv), "STALESWEEP_CLOUD_RUN_ENDPOINT=" + fake.Addr}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", addr)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", stderr.String())
		}
	}()
	waitListening(t, addr)

	status, body := call(t, http.MethodGet, "http://"+addr+"/StartWorkflow", "")
	if status != http.StatusMethodNotAllowed || !strings.Contains(body, "method_not_allowed") {
		t.Errorf("GET: %d %s, want 405", status, body)
	}
	status, body = call(t, http.MethodPost, "http://"+addr+"/StartWorkflow",
		fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q}}`, org))
	var out map[string]any
	if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || out["started_count"] != float64(1) {
		t.Fatalf("POST: %d %s, want 200 with one sync started", status, body)
	}
	snap, err := fs.Collection(ledger.ExecutionsCollection).Doc("row-1").Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := snap.DataAt("outcome"); v != "succeeded" {
		t.Errorf("row outcome = %v, want succeeded", v)
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(20 * time.Millisecond) // waiting for a process to listen
	}
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
