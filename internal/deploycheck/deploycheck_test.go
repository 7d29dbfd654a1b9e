package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

func TestTheModuleMatchesTheCode(t *testing.T) {
	findings, err := All("../../terraform", "../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
	targets, _ := RegisteredTargets("../../functions")
	if len(targets) != 4 {
		t.Errorf("registered targets = %v, want the four", targets)
	}
}

func TestTheExampleUsesTheModule(t *testing.T) {
	m, err := Load("../../terraform/examples/basic")
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
	targets, err := RegisteredTargets("../../functions")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, old, new string
		check                func(*Module) []Finding
		want                 string // in the finding
	}{
		{"an entry point nobody registers", "main.tf", `entry_point = "Dispatch"`, `entry_point = "Dispatcher"`,
			func(m *Module) []Finding { return CheckTargets(m, targets) }, "Dispatch"},
		{"a registered target left out", "main.tf", `    start_workflow = { entry_point = "StartWorkflow", topic = null, budget_env = "STALESWEEP_RUN_BUDGET" }`, ``,
			func(m *Module) []Finding { return CheckTargets(m, targets) }, "StartWorkflow is registered"},
		{"a target on the wrong topic", "main.tf", `entry_point = "Sweep", topic = "sweeps"`, `entry_point = "Sweep", topic = "syncs"`,
			func(m *Module) []Finding { return CheckTargets(m, targets) }, "Sweep is triggered"},
		{"another runtime", "functions.tf", `runtime     = "go126"`, `runtime     = "go125"`,
			func(m *Module) []Finding { return CheckTargets(m, targets) }, "go126"},
		{"the runtime may not publish syncs", "iam.tf", `resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {`, `resource "google_pubsub_topic_iam_member" "runtime_publishes_syncs" {
  count   = 0`, nil, "may not publish to stalesweep-syncs"},
		{"a topic the code publishes to is missing", "pubsub.tf", `name       = local.topics.syncs`, `name       = "${var.name_prefix}-sync"`, CheckTopics, "stalesweep-syncs is not created"},
		{"an extra role for the runtime", "iam.tf", `["roles/datastore.user", "roles/run.viewer"]`, `["roles/datastore.user", "roles/run.viewer", "roles/editor"]`, CheckRoles, "roles/editor"},
		{"a missing role for the runtime", "iam.tf", `["roles/datastore.user", "roles/run.viewer"]`, `["roles/datastore.user"]`, CheckRoles, "missing grant (kubernetes false): serviceAccount:${google_service_account.runtime.email}|roles/run.viewer"},
		{"the trigger may invoke every function", "iam.tf", `for_each = local.event_functions
  project  = var.project_id`, `for_each = local.functions
  project  = var.project_id`, CheckRoles, "not limited to local.event_functions"},
		{"public access", "iam.tf", `member   = each.value`, `member   = "allUsers"`, CheckNoPublic, "start_workflow_invokers.member grants public access"},
		{"public access in a list", "iam.tf", `role     = "roles/run.invoker"
  member   = local.trigger_member`, `role     = "roles/run.invoker"
  member   = local.trigger_member
  members  = ["allAuthenticatedUsers"]`, CheckNoPublic, "trigger_invokes.members grants public access"},
		{"an index the queries need is missing", "firestore_indexes.tf.json", `"field_path": "observed_at"`, `"field_path": "observed"`,
			func(m *Module) []Finding { return CheckIndexes(m, ledger.Indexes()) }, "does not declare runner_executions"},
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
	entries, err := os.ReadDir("../../terraform")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../../terraform", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
