package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheModuleMatchesTheCode(t *testing.T) {
	findings, err := All("../../../terraform")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
	targets, _ := RegisteredTargets("../../../functions")
	if len(targets) != 5 {
		t.Errorf("registered targets = %v, want the five", targets)
	}
}

func TestTheExampleUsesTheModule(t *testing.T) {
	m, err := Load("../../../terraform/examples/basic")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range m.Blocks {
		if b.Type == "module" {
			if a, ok := b.Body.Attributes["source"]; ok && m.Render(a.Expr) == "../.." {
				found = true
			}
		}
	}
	if !found {
		t.Error("examples/basic does not use the module at ../..")
	}
}

// Each check must fail when its rule is broken: copy the module, break one rule, check again.
func TestEachCheckCatchesABrokenCopy(t *testing.T) {
	tests := []struct {
		name, file, old, new string
		check                func(*Module) []Finding
		want                 string // in the finding
	}{
		{"a target on the wrong topic", "main.tf", `entry_point = "Sweep", topic = "sweeps"`, `entry_point = "Sweep", topic = "syncs"`,
			CheckTargets, "Sweep is triggered"},
		{"the runtime may not publish syncs", "iam.tf", `resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {`, `resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {
  count   = 0`, nil, "may not publish to stalesweep-syncs"},
		{"an extra role for the build", "iam.tf", `role    = "roles/logging.logWriter"`, `role    = "roles/editor"`, CheckRoles, "roles/editor"},
		{"a missing role for the runtime", "iam.tf", `resource "google_project_iam_member" "runtime_executors" {`, `resource "google_project_iam_member" "runtime_executors" {
  count   = 0`, CheckRoles, "missing grant (kubernetes false, secret false, token creator false): serviceAccount:${google_service_account.runtime.email}|custom:runtime{run.executions.get}|project"},
		{"the clusters' secret readable without Kubernetes", "iam.tf", `count     = local.kube_secret ? 1 : 0`, `count     = var.kube_clusters_secret != "" ? 1 : 0`,
			CheckRoles, "unexpected grant (kubernetes false, secret true, token creator false): serviceAccount:${google_service_account.runtime.email}|roles/secretmanager.secretAccessor"},
		{"the Pub/Sub agent's token creator on the runtime account", "iam.tf", `service_account_id = google_service_account.trigger.name`, `service_account_id = google_service_account.runtime.name`,
			CheckRoles, "iam.serviceAccountTokenCreator|service_account_id:${google_service_account.runtime.name}"},
		{"the Pub/Sub agent's token creator always on", "iam.tf", `count              = var.pubsub_agent_token_creator ? 1 : 0`, ``,
			CheckRoles, "unexpected grant (kubernetes false, secret false, token creator false): serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com|roles/iam.serviceAccountTokenCreator"},
		{"the build may write every repository", "iam.tf", `resource "google_artifact_registry_repository_iam_member" "build_writes_images" {`, `resource "google_project_iam_member" "build_writes_images" {`,
			CheckRoles, "unexpected grant (kubernetes false, secret false, token creator false): serviceAccount:${google_service_account.build.email}|roles/artifactregistry.writer|project"},
		{"the build runs as the default build identity", "functions.tf", `    service_account   = google_service_account.build.id
`, ``, CheckRoles, "build_config.service_account"},
		{"the audience taken from the request", "functions.tf", `STALESWEEP_AUTH_AUDIENCE      = join(",", local.start_workflow_audiences)`, `STALESWEEP_AUTH_AUDIENCE      = "request"`,
			CheckStartWorkflowAuth, `STALESWEEP_AUTH_AUDIENCE is "request"`},
		{"gcloud's tokens always accepted", "functions.tf", `STALESWEEP_AUTH_ACCEPT_GCLOUD = tostring(var.accept_gcloud_tokens)`, `STALESWEEP_AUTH_ACCEPT_GCLOUD = "true"`,
			CheckStartWorkflowAuth, "var.accept_gcloud_tokens"},
		{"callers not from the invokers", "functions.tf", `STALESWEEP_ALLOWED_CALLERS    = join(",", local.allowed_callers)`, `STALESWEEP_ALLOWED_CALLERS    = var.callers`,
			CheckStartWorkflowAuth, "does not derive from var.start_workflow_invokers"},
		{"callers by email only", "main.tf", `    [for email in local.invoker_service_accounts : data.google_service_account.invokers[email].unique_id],
`, ``, CheckStartWorkflowAuth, "lacks the invokers' unique_id"},
		{"the sink sends every entry", "sinks.tf", `  filter                 = local.execution_end_filter
  unique_writer_identity = true`, `  unique_writer_identity = true`, CheckSinks, "the project sink has no filter"},
		{"the Kubernetes filter with Kubernetes off", "sinks.tf", `if var.enable_kubernetes || k != "kubernetes"`, `if true`, CheckSinks,
			"(kubernetes false, secret false, token creator false) the project sink's filter is not what the code's signals generate"},
		{"a generated filter edited", "log_sinks.tf.json", `jsonPayload.reason=\"Completed\" OR `, ``, CheckSinks, "filter is not what the code's signals generate"},
		{"a folder sink beside the project's", "sinks.tf", `count            = var.log_sink_scope == "folder" ? 1 : 0`, `count            = 1`, CheckSinks, "2 sinks exist, want one"},
		{"the sink sends elsewhere", "sinks.tf", `ends_destination = "pubsub.googleapis.com/${google_pubsub_topic.ends.id}"`, `ends_destination = "pubsub.googleapis.com/${google_pubsub_topic.syncs.id}"`,
			CheckSinks, "the project sink does not send to the ends topic"},
		{"the sink's identity publishes to every topic", "sinks.tf", `resource "google_pubsub_topic_iam_member" "project_sink_publishes_ends" {`, `resource "google_project_iam_member" "project_sink_publishes_ends" {`,
			CheckRoles, "unexpected grant (kubernetes false, secret false, token creator false): ${google_logging_project_sink.ends[0].writer_identity}|roles/pubsub.publisher|project"},
		{"the trigger may invoke every function", "iam.tf", `for_each = local.event_functions
  project  = var.project_id`, `for_each = local.functions
  project  = var.project_id`, CheckRoles, "not limited to local.event_functions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyModule(t)
			path := filepath.Join(dir, tt.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), tt.old) {
				t.Fatalf("%s does not contain %q: the mutation is stale", tt.file, tt.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(src), tt.old, tt.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			check := tt.check
			if check == nil {
				check = func(m *Module) []Finding { return append(CheckTopics(m), CheckRoles(m)...) }
			}
			got := check(m)
			for _, f := range got {
				if strings.Contains(f.String(), tt.want) {
					t.Logf("caught: %s", f)
					return
				}
			}
			t.Errorf("the check did not report %q on the broken copy; it found %v", tt.want, got)
		})
	}
}

func copyModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir("../../../terraform")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../../../terraform", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
