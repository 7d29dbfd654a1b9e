package functions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/emulator/localpipeline"
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/auth"
	"github.com/stalesweep/stalesweep/internal/auth/authtest"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// The package's world: one functions framework server serving every target, as `stalesweep
// serve` does; the Firestore and Pub/Sub emulators with the pipeline's topics pushing to that
// server; the Cloud Run fake; and Google's signing keys replaced by a test key, so real ID
// tokens are verified by the real validator.
var (
	fake     *cloudrunfake.Server
	project  = testenv.Project()
	baseURL  string
	issuer   *authtest.Issuer // stands in for Google's token issuer and signing keys
	audience = "https://stalesweep-start-workflow-123456789.europe-west1.run.app"
	allowed  = "ops@example.com"
	// robot is a service account on the allow-list by its email and, as Terraform writes it,
	// by its unique id robotID, which is all a token minted without its email names.
	robot   = "robot@p.iam.gserviceaccount.com"
	robotID = "113000000000000000042"
	// spy watches the functions' own Firestore connection: every write any target commits.
	// Tests share it (and the process), so each filters it by its own documents' ids.
	spy = fsspy.New()
)

func TestMain(m *testing.M) { testenv.Main(&setupM{m}, testenv.WithPubSub()) }

// setupM runs the package's setup once the emulators are up, then the tests.
type setupM struct{ m *testing.M }

func (s *setupM) Run() int {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: setup:", err)
		return 1
	}
	return s.m.Run()
}

func setup() error {
	var err error
	if fake, err = cloudrunfake.NewServer(); err != nil {
		return err
	}
	port, err := gcloudemu.FreePort()
	if err != nil {
		return err
	}
	os.Setenv("GOOGLE_CLOUD_PROJECT", project)
	os.Setenv(cloudrun.EndpointEnv, fake.Addr)
	os.Setenv(app.EnvLostGrace, "1h")
	os.Unsetenv("FUNCTION_TARGET")
	baseURL = "http://127.0.0.1:" + strconv.Itoa(port)

	if issuer, err = authtest.New(); err != nil {
		return err
	}
	// The targets' dependencies, built as in production but with the spy on their Firestore
	// connection.
	deps = app.NewLazy(func(ctx context.Context) (*app.App, error) {
		cfg, err := app.ConfigFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		return app.New(ctx, cfg, logger(), time.Now, app.Parts{FirestoreDialOptions: spy.DialOptions()})
	})
	verifier = app.NewLazy(func(ctx context.Context) (*auth.Verifier, error) {
		return auth.New(ctx, testAuth())
	})

	// The fast tier (-short) has no Pub/Sub emulator: the targets are served, the topics are not
	// made, and every test that needs them skips (testenv.FirestoreProject, in newFleetWorld).
	if !testing.Short() {
		if err := createTopics(); err != nil {
			return err
		}
	}
	go func() {
		// The framework's server cannot be stopped; it ends with the test binary.
		if err := funcframework.StartHostPort("127.0.0.1", strconv.Itoa(port)); err != nil {
			fmt.Fprintln(os.Stderr, "functions framework:", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the functions framework did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond) // waiting for a server to listen
	}
}

// createTopics makes the pipeline's topics in the Pub/Sub emulator, pushing to baseURL.
func createTopics() error {
	ctx := context.Background()
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return err
	}
	defer ps.Close()
	return localpipeline.Create(ctx, ps, pipeline.Topics{}, baseURL)
}

// testAuth is StartWorkflow's authentication as the Terraform module configures it: the
// function's URL, gcloud's own tokens, and the callers by email and by unique id; only the
// signing keys are the test issuer's.
func testAuth() auth.Config {
	return auth.Config{Audiences: []string{audience}, AcceptGcloud: true, Allowed: []string{allowed, robot, robotID}, HTTPClient: issuer.Client()}
}

// idToken signs an ID token as Google would, with claims over the defaults of a valid token
// for the allowed caller.
func idToken(t *testing.T, claims map[string]any) string {
	t.Helper()
	c := map[string]any{
		"iss": "https://accounts.google.com", "aud": audience, "email": allowed, "email_verified": true,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "sub": "1234567890",
	}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return issuer.Mint(authtest.Claims(c))
}

func bearer(t *testing.T) http.Header {
	return http.Header{"Authorization": {"Bearer " + idToken(t, nil)}, "Content-Type": {"application/json"}}
}

// world is one test's data: its own organizations in the package's project.
type world struct {
	fs  *firestore.Client
	org string
}

// newWorld starts a test's world with one organization that has sweeps enabled.
func newWorld(t *testing.T) world {
	w := newFleetWorld(t)
	w.organization(t, w.org, true)
	return w
}

// newFleetWorld starts a test's world whose own organization has no organizations document:
// a fleet test dispatches to every enabled organization in the project and must find only
// the fleet it seeded.
func newFleetWorld(t *testing.T) world {
	fake.ClearFaults()
	return world{fs: testenv.FirestoreProject(t, project), org: uuid.NewString()}
}

// sweepRun writes the record of an execution-sync run of org, as Sweep leaves it: still
// reconciling (publishing its syncs) when started is nil, else completed having started those
// rows. A sync message is honoured only for such a run.
func (w world) sweepRun(t *testing.T, run, org string, started ...string) {
	t.Helper()
	now := time.Now().UTC()
	rec := runstore.RunRecord{
		WorkflowRunUUID: run, WorkflowType: string(contract.ExecutionSyncCloudRun), Status: workflow.StateReconciling,
		Trigger: string(workflow.TriggerSchedule), Actor: "pubsub:stalesweep-sweeps",
		InitialData: map[string]any{"organization_uuid": org}, InitiatedAt: now, UpdatedAt: now,
	}
	if started != nil {
		rec.Status, rec.CompletedAt = workflow.StateCompleted, now
		rec.Output = map[string]any{"organization_uuid": org, "started_runner_execution_uuids": started}
	}
	if err := runstore.New(w.fs).CreateRun(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// organization writes organizations/{org} with sweeps_enabled set to enabled.
func (w world) organization(t *testing.T, org string, enabled bool) {
	t.Helper()
	if err := (ledgertest.Organizations{Client: w.fs}).Put(context.Background(), ledger.Organization{UUID: org, SweepsEnabled: enabled}); err != nil {
		t.Fatal(err)
	}
}

type rowKind string

const (
	kindSucceeded rowKind = "succeeded"
	kindFailed    rowKind = "failed"
	kindRunning   rowKind = "running"
)

// stale seeds a row of org not observed for an hour, whose execution Cloud Run reports as kind.
func (w world) stale(t *testing.T, org string, kind rowKind) string {
	t.Helper()
	return w.execution(t, org, kind, time.Now().Add(-time.Hour))
}

func (w world) row(t *testing.T, id string) ledger.Execution {
	t.Helper()
	r, err := ledger.NewExecutionStore(w.fs, ledger.TxConfig{}, ledger.Retention{}).Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w world) runRecords(t *testing.T) []runstore.RunRecord {
	t.Helper()
	snaps, err := w.fs.Collection(ledger.RunsCollection).Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []runstore.RunRecord
	for _, s := range snaps {
		var r runstore.RunRecord
		if err := s.DataTo(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// eventually polls cond until it holds or timeout passes; it waits on asynchronous deliveries
// by the Pub/Sub emulator, which offer nothing to block on.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pushBody is a raw Pub/Sub push request body, as the emulator delivers it.
func pushBody(data []byte, attrs map[string]string, messageID string) []byte {
	b, _ := json.Marshal(map[string]any{
		"subscription": "projects/" + project + "/subscriptions/test",
		"message": map[string]any{
			"data": base64.StdEncoding.EncodeToString(data), "attributes": attrs,
			"messageId": messageID, "publishTime": time.Now().UTC().Format(time.RFC3339Nano),
		},
	})
	return b
}

// ceRequest turns a push body into a binary-mode messagePublished CloudEvent, as Eventarc sends.
func ceHeaders(id string) http.Header {
	return http.Header{
		"Content-Type":   {"application/json"},
		"Ce-Id":          {id},
		"Ce-Specversion": {"1.0"},
		"Ce-Type":        {"google.cloud.pubsub.topic.v1.messagePublished"},
		"Ce-Source":      {"//pubsub.googleapis.com/projects/" + project + "/topics/t"},
	}
}

func startBody(org string, extra string) string {
	return fmt.Sprintf(`{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": %q%s}}`, org, extra)
}
