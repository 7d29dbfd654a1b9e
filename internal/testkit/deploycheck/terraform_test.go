package deploycheck_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stalesweep/stalesweep/internal/testkit/deploycheck"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/testkit/tfstandin"
)

// terraform runs the real terraform binary with the stand-in providers (internal/testkit/tfstandin)
// installed from a local filesystem mirror: no network, no registry.
type terraform struct {
	cliConfig string
	pluginDir string
}

var (
	standinOnce sync.Once
	standin     *terraform
	standinErr  error
	standinDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if standinDir != "" {
		_ = os.RemoveAll(standinDir)
	}
	os.Exit(code)
}

// newTerraform builds the stand-in once per test binary.
func newTerraform(t *testing.T) *terraform {
	t.Helper()
	testenv.Need(t, "terraform binary")
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatal("terraform is not installed: the module's validate and plan checks need it")
	}
	standinOnce.Do(func() {
		standinDir, standinErr = os.MkdirTemp("", "standin-")
		if standinErr != nil {
			return
		}
		var cfg string
		cfg, standinErr = tfstandin.Install(context.Background(), "../../..", standinDir)
		standin = &terraform{cliConfig: cfg, pluginDir: filepath.Join(standinDir, "mirror")}
	})
	if standinErr != nil {
		t.Fatal(standinErr)
	}
	return standin
}

// run runs terraform in dir and returns its stdout; stderr goes into the error.
func (tf *terraform) run(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+tf.cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"TF_PLUGIN_CACHE_DIR=", "TF_INPUT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), &tfError{args: args, err: err, out: stdout.String() + stderr.String()}
	}
	return stdout.String(), nil
}

type tfError struct {
	args []string
	err  error
	out  string
}

func (e *tfError) Error() string {
	return "terraform " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.out
}

// validate runs init and validate in dir and returns validate's diagnostics as "file:line:
// summary" lines (none when it is valid).
func (tf *terraform) validate(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := tf.run(t, dir, "init", "-input=false", "-backend=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	out, _ := tf.run(t, dir, "validate", "-json", "-no-color")
	var v struct {
		Valid       bool `json:"valid"`
		Diagnostics []struct {
			Severity string `json:"severity"`
			Summary  string `json:"summary"`
			Detail   string `json:"detail"`
			Range    *struct {
				Filename string `json:"filename"`
				Start    struct {
					Line int `json:"line"`
				} `json:"start"`
			} `json:"range"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("terraform validate -json printed %q: %v", out, err)
	}
	var diags []string
	for _, d := range v.Diagnostics {
		if d.Severity != "error" {
			continue
		}
		where := "?"
		if d.Range != nil {
			where = filepath.Base(d.Range.Filename) + ":" + strconv.Itoa(d.Range.Start.Line)
		}
		diags = append(diags, where+": "+d.Summary+": "+d.Detail)
	}
	if !v.Valid && len(diags) == 0 {
		t.Fatalf("invalid without an error diagnostic: %s", out)
	}
	return diags
}

// plan plans the example in dir (its module already copied beside it) with vars and returns the
// plan as `terraform show -json` prints it.
func (tf *terraform) plan(t *testing.T, dir string, vars ...string) *deploycheck.Plan {
	t.Helper()
	if _, err := tf.run(t, dir, "init", "-input=false", "-no-color"); err != nil {
		t.Fatal(err)
	}
	args := []string{"plan", "-input=false", "-no-color", "-lock=false", "-out=tfplan"}
	for _, v := range vars {
		args = append(args, "-var", v)
	}
	if _, err := tf.run(t, dir, args...); err != nil {
		t.Fatal(err)
	}
	out, err := tf.run(t, dir, "show", "-json", "tfplan")
	if err != nil {
		t.Fatal(err)
	}
	p, err := deploycheck.ParsePlan([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// copyTree copies the module with its examples into a fresh directory and returns the copy of
// the module's root.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "terraform")
	err := filepath.WalkDir("../../../terraform", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../../../terraform", path)
		if d.IsDir() {
			if d.Name() == ".terraform" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasPrefix(d.Name(), "terraform.tfstate") || d.Name() == ".terraform.lock.hcl" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// The module and its example validate against the providers' own schemas.
func TestTheModuleAndTheExampleValidate(t *testing.T) {
	tf := newTerraform(t)
	module := copyTree(t)
	for _, dir := range []string{module, filepath.Join(module, "examples", "basic")} {
		if diags := tf.validate(t, dir); len(diags) > 0 {
			t.Errorf("terraform validate %s:\n%s", dir, strings.Join(diags, "\n"))
		}
	}
}

// copyDir copies the files of one directory into a fresh one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// edit replaces old with new, once, in file; the test fails if old is not there.
func edit(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q to break", file, old)
	}
	if err := os.WriteFile(file, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lineOf is the line of the first occurrence of s in file.
func lineOf(t *testing.T, file, s string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(s))
	if i < 0 {
		t.Fatalf("%s has no %q", file, s)
	}
	return bytes.Count(b[:i], []byte("\n")) + 1
}

// schemaBreaks are the mistakes only the providers' schemas catch: each is made in a copy, and
// validate must fail naming the file and the line of the mistake.
var schemaBreaks = []struct {
	name, old, new string
	mark           string // text on the line validate must name
	want           string // in the diagnostic
}{
	{name: "a misspelled argument", old: `entry_point = `, new: `entry_pont = `, mark: "entry_pont", want: "Unsupported argument"},
	{name: "a missing required argument", old: "role    = \"roles/editor\"\n", new: "", mark: `resource "google_project_iam_member" "project"`, want: "Missing required argument"},
	{name: "a block written as an attribute", old: "  service_config {\n", new: "  service_config = {\n", mark: "service_config = {", want: "Unsupported argument"},
	{name: "a wrong type", old: `max_instance_count = 1`, new: `max_instance_count = "one"`, mark: `max_instance_count = "one"`, want: "Incorrect attribute value type"},
	{name: "an attribute written as a block", old: `labels = { foo = "bar" }`, new: "labels {\n    foo = \"bar\"\n  }", mark: "labels {", want: "Unsupported block type"},
	{name: "an unknown resource type", old: `resource "google_pubsub_topic" "example"`, new: `resource "google_pubsub_topics" "example"`, mark: `resource "google_pubsub_topics"`, want: "Invalid resource type"},
}

// The stand-in is calibrated on configurations the provider documents: they validate, and each
// broken copy fails at the line of its mistake.
func TestTheStandInAcceptsDocumentedConfigurationsAndRefusesBrokenOnes(t *testing.T) {
	tf := newTerraform(t)
	good := copyDir(t, "testdata/calibration")
	if diags := tf.validate(t, good); len(diags) > 0 {
		t.Fatalf("the documented configurations do not validate:\n%s", strings.Join(diags, "\n"))
	}
	for _, b := range schemaBreaks {
		t.Run(b.name, func(t *testing.T) {
			dir := copyDir(t, "testdata/calibration")
			file := filepath.Join(dir, "main.tf")
			edit(t, file, b.old, b.new)
			where := "main.tf:" + strconv.Itoa(lineOf(t, file, b.mark))
			diags := tf.validate(t, dir)
			if !slices.ContainsFunc(diags, func(d string) bool { return strings.HasPrefix(d, where+": ") && strings.Contains(d, b.want) }) {
				t.Errorf("validate said %q; want %q at %s", diags, b.want, where)
			}
		})
	}
}

// The same mistakes in the module fail its validate at the file and line, and the plan policy
// catches what validate cannot: a public invoker, an entry point the code does not register.
func TestTheGateFailsOnABrokenModuleNamingFileAndLine(t *testing.T) {
	tf := newTerraform(t)
	for _, b := range []struct {
		name, file, old, new, mark, want string
	}{
		{name: "a misspelled argument", file: "functions.tf", old: "    entry_point = each.value.entry_point", new: "    entry_pont = each.value.entry_point", mark: "entry_pont", want: "Unsupported argument"},
		{name: "a missing required argument", file: "pubsub.tf", old: "  name       = local.topics.ticks\n", new: "", mark: `resource "google_pubsub_topic" "ticks"`, want: "Missing required argument"},
		{name: "a block written as an attribute", file: "scheduler.tf", old: "  retry_config {", new: "  retry_config = {", mark: "retry_config = {", want: "Unsupported argument"},
		{name: "a wrong type", file: "scheduler.tf", old: "retry_count          = 3", new: "retry_count          = [3]", mark: "retry_count          = [3]", want: "Incorrect attribute value type"},
	} {
		t.Run(b.name, func(t *testing.T) {
			module := copyTree(t)
			file := filepath.Join(module, b.file)
			edit(t, file, b.old, b.new)
			where := b.file + ":" + strconv.Itoa(lineOf(t, file, b.mark))
			diags := tf.validate(t, module)
			if !slices.ContainsFunc(diags, func(d string) bool { return strings.HasPrefix(d, where+": ") && strings.Contains(d, b.want) }) {
				t.Errorf("validate said %q; want %q at %s", diags, b.want, where)
			}
		})
	}
}

// operators are representative StartWorkflow invokers: a user and a service account.
var operators = []string{"user:oncall@example.com", "serviceAccount:ci@demo-project.iam.gserviceaccount.com"}

// setting is what the example is planned with: representative variables, Kubernetes on (with its
// clusters in a secret) or off.
func setting(kube bool) deploycheck.PlanSetting {
	return deploycheck.PlanSetting{Kubernetes: kube, Project: "demo-project", Region: "europe-west1", Operators: operators}
}

func planVars(s deploycheck.PlanSetting) []string {
	ops, _ := json.Marshal(s.Operators)
	v := []string{"project_id=" + s.Project, "region=" + s.Region, "operators=" + string(ops)}
	if s.Kubernetes {
		v = append(v, "enable_kubernetes=true", "kube_clusters_secret=stalesweep-kube-clusters")
	}
	return v
}

// planOf plans the example of a copy of the module and holds the plan to the code.
func planOf(t *testing.T, tf *terraform, module string, kube bool) []deploycheck.Finding {
	t.Helper()
	s := setting(kube)
	p := tf.plan(t, filepath.Join(module, "examples", "basic"), planVars(s)...)
	m, err := deploycheck.Load(module)
	if err != nil {
		t.Fatal(err)
	}
	findings, err := deploycheck.CheckPlan(p, m, "../../..", s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Of("google_cloudfunctions2_function")) == 0 {
		t.Fatal("the plan has no functions: the policy would pass on nothing")
	}
	return findings
}

// The example plans, with Kubernetes on and off, and its resolved plan keeps the policy.
func TestTheExamplePlansAndItsPlanKeepsThePolicy(t *testing.T) {
	tf := newTerraform(t)
	for _, kube := range []bool{false, true} {
		t.Run(map[bool]string{false: "kubernetes off", true: "kubernetes on"}[kube], func(t *testing.T) {
			for _, f := range planOf(t, tf, copyTree(t), kube) {
				t.Error(f)
			}
		})
	}
}

// The policy on the plan catches what validate cannot, naming the file and line of the mistake.
func TestThePlanPolicyFailsABrokenModuleNamingFileAndLine(t *testing.T) {
	tf := newTerraform(t)
	for _, b := range []struct {
		name, file, old, new string
		kube                 bool
		at, mark, rule       string // the finding names at (file) and the line of mark in it
	}{
		{name: "an entry point that does not exist", file: "main.tf", old: `entry_point = "Dispatch"`, new: `entry_point = "Dispatcher"`, mark: `"Dispatcher"`, rule: "functions"},
		{name: "a registered target left out", file: "main.tf", old: `    sync_execution = { entry_point = "SyncExecution", topic = "syncs", budget_env = "STALESWEEP_SYNC_BUDGET" }` + "\n", new: ``,
			at: "functions.tf", mark: `resource "google_cloudfunctions2_function" "fn"`, rule: "functions"},
		{name: "a public invoker", file: "iam.tf", old: "  member   = each.value\n", new: "  member   = \"allUsers\"\n", mark: `"allUsers"`, rule: "public"},
		{name: "a runtime other than go.mod's", file: "functions.tf", old: `runtime     = "go126"`, new: `runtime     = "go122"`, mark: `"go122"`, rule: "functions"},
		{name: "a tick the code refuses", file: "scheduler.tf", old: "workflow_type = each.key,", new: "workflow_type = upper(each.key),", mark: `data       = base64encode(`, rule: "ticks"},
		{name: "a variable no code reads", file: "functions.tf", old: "STALESWEEP_AUTH_AUDIENCE      =", new: "STALESWEEP_AUTH_AUDIENCES     =", mark: "STALESWEEP_AUTH_AUDIENCES", rule: "env"},
		{name: "a topic the code publishes to is missing", file: "pubsub.tf", old: `name       = local.topics.syncs`, new: `name       = "${var.name_prefix}-sync"`, mark: `"${var.name_prefix}-sync"`, rule: "topics"},
		{name: "roles/editor for the build", file: "iam.tf", old: `role    = "roles/logging.logWriter"`, new: `role    = "roles/editor"`, mark: `"roles/editor"`, rule: "project roles"},
		{name: "roles/run.viewer back on the runtime", file: "iam.tf", old: `role    = google_project_iam_custom_role.runtime.id`, new: `role    = "roles/run.viewer"`, mark: `"roles/run.viewer"`, rule: "project roles"},
		{name: "the custom role lists executions too", file: "iam.tf", old: `["run.executions.get"],`, new: `["run.executions.get", "run.executions.list"],`, mark: `"run.executions.list"`, rule: "custom role"},
		{name: "the custom role lacks the GKE permission", file: "iam.tf", old: `var.enable_kubernetes ? ["container.clusters.get"] : [],`, new: `[],`, kube: true, mark: "permissions = concat(", rule: "custom role"},
		{name: "the custom role keeps the GKE permission without Kubernetes", file: "iam.tf", old: `var.enable_kubernetes ? ["container.clusters.get"] : [],`, new: `["container.clusters.get"],`, mark: `"container.clusters.get"`, rule: "custom role"},
		{name: "Firestore on every database", file: "iam.tf", old: `"resource.name == \"projects/${var.project_id}/databases/${var.firestore_database}\""`,
			new: `"resource.name.startsWith(\"projects/${var.project_id}/databases/\")"`, mark: `resource.name.startsWith(\"projects/${var.project_id}/databases/\")`, rule: "firestore"},
		{name: "the build reads every bucket", file: "iam.tf", old: `expression  = "resource.name == \"projects/_/buckets/${local.gcf_sources_bucket}\" ||`,
			new: `expression  = "true ||`, mark: `expression  = "true ||`, rule: "project roles"},
		{name: "the audience of another function", file: "main.tf", old: `start_workflow_name = "${var.name_prefix}-start-workflow"`, new: `start_workflow_name = "${var.name_prefix}-sweep"`,
			at: "functions.tf", mark: "STALESWEEP_AUTH_AUDIENCE", rule: "auth"},
		{name: "an audience that is not the function's", file: "main.tf", old: `${var.region}.run.app",`, new: `${var.region}.run.app.example.com",`,
			at: "functions.tf", mark: "STALESWEEP_AUTH_AUDIENCE", rule: "auth"},
		{name: "callers by email only", file: "main.tf", old: `    [for email in local.invoker_service_accounts : data.google_service_account.invokers[email].unique_id],` + "\n", new: ``,
			at: "functions.tf", mark: "STALESWEEP_ALLOWED_CALLERS", rule: "auth"},
		{name: "an index the queries need is missing", file: "firestore_indexes.tf.json", old: `"field_path": "observed_at"`, new: `"field_path": "observed"`,
			mark: `"collection": "runner_executions"`, rule: "indexes"},
		{name: "a metric counting another event", file: "alerts.tf.json", old: `jsonPayload.event=\"blind_executor\"`, new: `jsonPayload.event=\"blind\"`,
			mark: `"blind_executor_trips": {`, rule: "alerts"},
		{name: "a metric that leaves a function out", file: "alerts.tf.json", old: `google_cloudfunctions2_function.fn[k].name])`, new: `google_cloudfunctions2_function.fn[k].name if k != \"dispatch\"])`,
			mark: `"dispatch_capped": {`, rule: "alerts"},
		{name: "the receipts' expiry indexed for one collection only", file: "firestore_ttl.tf.json", old: `"query_scope": "COLLECTION_GROUP"`, new: `"query_scope": "COLLECTION"`,
			mark: `"syncs_expire_at": {`, rule: "ttl"},
		{name: "a TTL policy on the runners' rows", file: "firestore_ttl.tf.json", old: `"collection": "sweep_targets"`, new: `"collection": "runner_executions"`,
			mark: `"sweep_targets_expire_at": {`, rule: "ttl"},
	} {
		t.Run(b.name, func(t *testing.T) {
			module := copyTree(t)
			file := filepath.Join(module, b.file)
			edit(t, file, b.old, b.new)
			at := cmp.Or(b.at, b.file)
			where := at + ":" + strconv.Itoa(lineOf(t, filepath.Join(module, at), b.mark)) + ": "
			findings := planOf(t, tf, module, b.kube)
			if !slices.ContainsFunc(findings, func(f deploycheck.Finding) bool { return f.Rule == b.rule && strings.HasPrefix(f.Detail, where) }) {
				t.Errorf("findings %v; want a %s finding at %s", findings, b.rule, where)
			}
		})
	}
}

// The module pins each provider to the version its schema was checked at.
func TestTheModulePinsTheProvidersItIsCheckedAgainst(t *testing.T) {
	src, err := os.ReadFile("../../../terraform/versions.tf")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tfstandin.Names() {
		p, err := tfstandin.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		want := `version = "~> ` + p.Version + `"`
		block := string(src)
		i := strings.Index(block, "    "+name+" = {")
		if i < 0 || !strings.Contains(block[i:min(len(block), i+200)], want) {
			t.Errorf("versions.tf does not pin %s with %s, the version internal/testkit/tfstandin checks", name, want)
		}
	}
}
