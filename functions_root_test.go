package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const module = "github.com/stalesweep/stalesweep"

// The gen2 Go buildpack generates a main package that blank-imports the function's package and
// starts the functions framework; it uses that declarative form only when the root package
// imports functions-framework-go/functions. These tests check the root as the buildpack reads
// it, then build and run the main it would generate, for both packages it may pick.
func TestTheRootPackageIsWhatTheBuildpackNeeds(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", //nolint:staticcheck // SA1019: the buildpack reads the directory as it is, build tags aside, and so must this check
		func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	root, ok := pkgs["functions"]
	if !ok || len(pkgs) != 1 {
		t.Fatalf("root packages = %v, want exactly one named functions (like the ./functions folder)", keys(pkgs))
	}
	imports := map[string]bool{}
	for _, f := range root.Files {
		for _, imp := range f.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
	}
	for _, want := range []string{"github.com/GoogleCloudPlatform/functions-framework-go/functions", module + "/functions"} {
		if !imports[want] {
			t.Errorf("the root package does not import %s", want)
		}
	}
	if fi, err := os.Stat("functions"); err != nil || !fi.IsDir() {
		t.Error("there is no ./functions folder for the buildpack to find")
	}
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// generatedMain is the shape of the buildpack's declarative main.
func generatedMain(pkg string) string {
	return fmt.Sprintf(`package main

import (
	"log"
	"net/http"
	"os"

	_ %q

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
)

func main() {
	http.HandleFunc("/robots.txt", http.NotFound)
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if err := funcframework.Start(port); err != nil {
		log.Fatalf("Function failed to start: %%v", err)
	}
}
`, pkg)
}

// builtMains caches the generated main built for each package the buildpack may pick; TestMain
// removes them.
var builtMains = map[string]string{}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range builtMains {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// buildMain builds the main the buildpack would generate around pkg, once per test binary.
func buildMain(t *testing.T, pkg string) string {
	t.Helper()
	if bin, ok := builtMains[pkg]; ok {
		return bin
	}
	wd, _ := os.Getwd()
	dir, err := os.MkdirTemp("", "stalesweep-main-")
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(generatedMain(pkg)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The buildpack writes its main into the source tree at functions.local/app; an overlay
	// puts it there without touching the checkout.
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(wd, "functions.local", "app", "main.go"): main}})
	ov := filepath.Join(dir, "overlay.json")
	_ = os.WriteFile(ov, overlay, 0o600)
	bin := filepath.Join(dir, "fn")
	out, err := exec.Command("go", "build", "-overlay", ov, "-o", bin, "./functions.local/app").CombinedOutput()
	if err != nil {
		t.Fatalf("building the generated main: %v\n%s", err, out)
	}
	builtMains[pkg] = bin
	return bin
}

func TestTheMainTheBuildpackGeneratesServesEachTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the function binary twice")
	}
	for _, pkg := range []string{module, module + "/functions"} {
		t.Run(pkg, func(t *testing.T) {
			bin := buildMain(t, pkg)
			for target, probe := range map[string]func(url string) (int, string){
				"StartWorkflow": func(url string) (int, string) { return get(t, url) },
				"Dispatch": func(url string) (int, string) {
					return post(t, url, `{"subscription": "s", "message": {"data": "bm90IGpzb24=", "messageId": "1"}}`)
				},
			} {
				code, body := serve(t, bin, target, probe)
				want := http.StatusMethodNotAllowed // StartWorkflow at "/" refuses a GET before it builds anything
				if target == "Dispatch" {
					want = http.StatusOK // a malformed tick is acknowledged
				}
				if code != want || (target == "StartWorkflow" && !strings.Contains(body, "method_not_allowed")) {
					t.Errorf("%s served at / answered %d %s, want %d", target, code, body, want)
				}
			}
		})
	}
}

// On Cloud Run (K_SERVICE set) a bad setting stops the instance as it starts, naming the
// variable, so a deployment with it never becomes ready; locally the same binary would only
// fail its first request.
func TestOnCloudRunABadSettingStopsTheInstanceAtStartNamingIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the function binary")
	}
	bin := buildMain(t, module)
	base := []string{"K_SERVICE=stalesweep-x", "GOOGLE_CLOUD_PROJECT=p", "FIRESTORE_EMULATOR_HOST=127.0.0.1:1", "PORT=0"}
	for _, tc := range []struct {
		target, setting, want string
	}{
		{"Dispatch", "STALESWEEP_LOG_LEVEL=bogus", "STALESWEEP_LOG_LEVEL"},
		{"Sweep", "STALESWEEP_RUN_BUDGET=soon", "STALESWEEP_RUN_BUDGET"},
		{"SyncExecution", "STALESWEEP_KUBE_CLUSTERS={not json", "STALESWEEP_KUBE_CLUSTERS"},
		{"StartWorkflow", "STALESWEEP_AUTH=off", "STALESWEEP_AUTH"},
		{"StartWorkflow", "STALESWEEP_AUTH=OFF", "STALESWEEP_AUTH"},
		{"StartWorkflow", "STALESWEEP_AUTH_AUDIENCE=request", "STALESWEEP_AUTH_AUDIENCE"},
		{"StartWorkflow", "STALESWEEP_ALLOWED_CALLERS=ops", "STALESWEEP_ALLOWED_CALLERS"},
	} {
		t.Run(tc.target+" "+tc.setting, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			env := append(cleanEnv(), base...)
			env = append(env, "FUNCTION_TARGET="+tc.target, "STALESWEEP_AUTH_AUDIENCE=https://x-1.europe-west1.run.app", tc.setting)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Errorf("exit %v, output %s; want exit 2 naming %s", err, out, tc.want)
			}
		})
	}
}

// cleanEnv is the test's environment without stalesweep's settings and the platform's.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STALESWEEP_") && !strings.HasPrefix(kv, "K_SERVICE=") && !strings.HasPrefix(kv, "FUNCTION_TARGET=") {
			out = append(out, kv)
		}
	}
	return out
}

// serve runs the function binary for one target, as Cloud Run would, and probes it.
func serve(t *testing.T, bin, target string, probe func(string) (int, string)) (int, string) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "FUNCTION_TARGET="+target, fmt.Sprintf("PORT=%d", port), "STALESWEEP_AUTH=off",
		"GOOGLE_CLOUD_PROJECT=p", "FIRESTORE_EMULATOR_HOST=127.0.0.1:1", "PUBSUB_EMULATOR_HOST=127.0.0.1:1", "K_SERVICE=")
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() {
		cancel() // stop the server, then reap it
		_ = cmd.Wait()
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start listening", target)
		}
		time.Sleep(20 * time.Millisecond) // waiting for a process to listen
	}
	return probe(url)
}

func get(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	_, _ = fmt.Fprint(b, readAll(resp))
	return resp.StatusCode, b.String()
}

func post(t *testing.T, url, body string) (int, string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

func readAll(resp *http.Response) string {
	b := make([]byte, 4096)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}
