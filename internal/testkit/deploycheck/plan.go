package deploycheck

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/tfstandin"
)

// Plan is the part of a plan, as `terraform show -json` prints it, that the policy reads: every
// resource as planned, with for_each and count expanded and variables and locals resolved.
// What is known only after apply (ids, emails, URLs) is absent from Values.
type Plan struct {
	Resources []PlannedResource
}

// PlannedResource is one resource instance of a plan.
type PlannedResource struct {
	Address string         `json:"address"`
	Mode    string         `json:"mode"`
	Type    string         `json:"type"`
	Name    string         `json:"name"`
	Values  map[string]any `json:"values"`
}

type planModule struct {
	Resources    []PlannedResource `json:"resources"`
	ChildModules []planModule      `json:"child_modules"`
}

// ParsePlan reads a plan printed by `terraform show -json`.
func ParsePlan(b []byte) (*Plan, error) {
	var raw struct {
		FormatVersion string `json:"format_version"`
		PlannedValues struct {
			RootModule planModule `json:"root_module"`
		} `json:"planned_values"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("read the plan: %w", err)
	}
	if raw.FormatVersion == "" {
		return nil, fmt.Errorf("read the plan: no format_version: not `terraform show -json` output")
	}
	p := &Plan{}
	var walk func(m planModule)
	walk = func(m planModule) {
		p.Resources = append(p.Resources, m.Resources...)
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(raw.PlannedValues.RootModule)
	return p, nil
}

// Of returns the managed resources of type typ, in address order.
func (p *Plan) Of(typ string) []PlannedResource {
	var out []PlannedResource
	for _, r := range p.Resources {
		if r.Mode == "managed" && r.Type == typ {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b PlannedResource) int { return strings.Compare(a.Address, b.Address) })
	return out
}

// at reads the value at a path of nested blocks and attributes ("build_config.entry_point": a
// single nested block is a list of one); nil when the path is not there.
func (r PlannedResource) at(path string) any {
	var v any = r.Values
	for _, part := range strings.Split(path, ".") {
		if l, ok := v.([]any); ok {
			if len(l) == 0 {
				return nil
			}
			v = l[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// str reads a string at a path (at).
func (r PlannedResource) str(path string) string {
	s, _ := r.at(path).(string)
	return s
}

// strMap reads a map of strings at a path (at).
func (r PlannedResource) strMap(path string) map[string]string {
	m, _ := r.at(path).(map[string]any)
	out := map[string]string{}
	for k, x := range m {
		out[k], _ = x.(string)
	}
	return out
}

// strs reads a list of strings at a path (at).
func (r PlannedResource) strs(path string) []string {
	l, _ := r.at(path).([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// PlanSetting is what a plan was made with, as the policy needs to know it.
type PlanSetting struct {
	Kubernetes bool     // enable_kubernetes
	Project    string   // project_id
	Region     string   // region
	Operators  []string // start_workflow_invokers: "user:EMAIL", "serviceAccount:EMAIL"
}

// CheckPlan holds a resolved plan to the code at root: each finding names the resource.
//   - functions: every registered function target is deployed exactly once, at its own entry
//     point, on the Go runtime go.mod names;
//   - env: every environment variable a function is given is one the code reads, and every
//     STALESWEEP_TOPIC_* names a topic the plan creates;
//   - public: no IAM member anywhere is allUsers or allAuthenticatedUsers;
//   - ticks: every scheduler job publishes, with trigger=schedule, a tick the code decodes, of a
//     workflow type this build declares, whose defaults its input schema accepts; the
//     Kubernetes sync is scheduled exactly when Kubernetes is on;
//   - topics: every topic the pipeline publishes to is created;
//   - custom role: the runtime's custom role holds exactly the permissions the executor
//     adapters declare (cloudrun.IAMPermissions, and kubejobs' with Kubernetes on);
//   - roles: no basic role, roles/run.viewer or roles/container.clusterViewer anywhere; on the
//     project no predefined role but datastore.user (only with the condition naming the
//     configured database), logging.logWriter, and storage.objectViewer (only with the
//     condition naming Cloud Functions' source bucket);
//   - auth: StartWorkflow's audience is exactly its two own URLs, its callers exactly the
//     operators' emails and their service accounts' unique ids;
//   - indexes: exactly the composite indexes the code's queries need;
//   - alerts: a logs-based metric per metric of alerts.Metrics, counting its event's lines of the
//     module's functions, a policy per alerting one, one dashboard charting them.
//   - sinks: one log sink, in the project, sending exactly the filter the code's signals
//     generate (Kubernetes' with Kubernetes on);
//   - ttl: a TTL policy on expire_at for exactly the collections of stalesweep's bookkeeping
//     (indexes.Expiring), each keeping the ascending index gc's query needs.
//
// What a plan cannot show stays with the checks on the HCL (All): which identity holds which
// grant and on which resource (service account emails and resource ids are known only after
// apply), which topic triggers which function, and where a value comes from (a variable or a
// literal).
func CheckPlan(p *Plan, m *Module, root string, s PlanSetting) ([]Finding, error) {
	registered, err := RegisteredTargets(filepath.Join(root, "functions"))
	if err != nil {
		return nil, err
	}
	runtime, err := goRuntime(root)
	if err != nil {
		return nil, err
	}
	read, err := EnvRead(root)
	if err != nil {
		return nil, err
	}
	var out []Finding
	// add names where in the module a finding comes from: the first line that holds the value
	// at fault, else the resource's attribute, else the resource.
	add := func(at, rule, format string, args ...any) {
		out = append(out, Finding{rule, at + ": " + fmt.Sprintf(format, args...)})
	}

	deployed := map[string][]string{}
	topics := map[string]bool{}
	for _, t := range p.Of("google_pubsub_topic") {
		topics[t.str("name")] = true
	}
	for _, fn := range p.Of("google_cloudfunctions2_function") {
		ep := fn.str("build_config.entry_point")
		deployed[ep] = append(deployed[ep], fn.Address)
		if got := fn.str("build_config.runtime"); got != runtime {
			add(m.locate(strconv.Quote(got), fn, "build_config.runtime"), "functions", "%s: runtime %q; go.mod builds with %s", fn.Address, got, runtime)
		}
		for k, v := range fn.strMap("service_config.environment_variables") {
			if !read[k] {
				add(m.locate(k, fn, "service_config.environment_variables"), "env", "%s: sets %s, which no code reads", fn.Address, k)
			}
			if strings.HasPrefix(k, "STALESWEEP_TOPIC_") && !topics[v] {
				add(m.locate(k, fn, "service_config.environment_variables"), "env", "%s: %s=%s names no topic the plan creates", fn.Address, k, v)
			}
		}
	}
	for _, target := range registered {
		if n := len(deployed[target]); n != 1 {
			add(m.locate(strconv.Quote(target), PlannedResource{Type: "google_cloudfunctions2_function", Name: "fn"}, ""), "functions", "target %s is deployed %d times, want once", target, n)
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(deployed)) {
		if !slices.Contains(registered, ep) {
			add(m.locate(strconv.Quote(ep), PlannedResource{Type: "google_cloudfunctions2_function", Name: "fn"}, "build_config.entry_point"), "functions",
				"%s: entry point %q is not a target the functions package registers (%v)", strings.Join(deployed[ep], ", "), ep, registered)
		}
	}

	for _, r := range p.Resources {
		if r.Mode != "managed" || !strings.HasSuffix(r.Type, "_iam_member") {
			continue
		}
		if member := r.str("member"); member == "allUsers" || member == "allAuthenticatedUsers" {
			add(m.locate(strconv.Quote(member), r, "member"), "public", "%s: grants %s to %s", r.Address, r.str("role"), member)
		}
	}

	scheduled := map[contract.WorkflowType]bool{}
	for _, job := range p.Of("google_cloud_scheduler_job") {
		tick, err := decodeTick(job)
		if err != nil {
			add(m.locate("", job, "pubsub_target.data"), "ticks", "%s: %v", job.Address, err)
			continue
		}
		scheduled[tick] = true
	}
	out = append(out, checkPlanTopics(p, m)...)
	out = append(out, checkPlanRoles(p, m, s)...)
	out = append(out, checkPlanAuth(p, m, s)...)
	out = append(out, checkPlanIndexes(p, m)...)
	out = append(out, checkPlanAlerts(p, m)...)
	out = append(out, checkPlanTTL(p, m)...)
	out = append(out, checkPlanSinks(p, m, s)...)
	if got := scheduled[contract.ExecutionSyncKubernetes]; got != s.Kubernetes {
		add(m.locate("", PlannedResource{Type: "google_cloud_scheduler_job", Name: "tick"}, ""), "ticks", "the Kubernetes sync is scheduled: %v; Kubernetes is on: %v", got, s.Kubernetes)
	}
	return out, nil
}

// decodeTick reads a scheduler job's message as Dispatch would.
func decodeTick(job PlannedResource) (contract.WorkflowType, error) {
	if tr := job.strMap("pubsub_target.attributes")["trigger"]; tr != "schedule" {
		return "", fmt.Errorf("attribute trigger=%q, want schedule", tr)
	}
	data, err := base64.StdEncoding.DecodeString(job.str("pubsub_target.data"))
	if err != nil {
		return "", fmt.Errorf("data is not base64: %w", err)
	}
	start, err := message.ParseStart(data)
	if err != nil {
		return "", fmt.Errorf("the tick does not decode: %w", err)
	}
	d, ok := app.Declared()[start.WorkflowType]
	if !ok {
		return "", fmt.Errorf("workflow type %q is not one this build declares", start.WorkflowType)
	}
	defaults := map[string]any{}
	if len(start.InitialData) > 0 {
		if err := json.Unmarshal(start.InitialData, &defaults); err != nil {
			return "", fmt.Errorf("initial_data is not an object: %w", err)
		}
	}
	for _, f := range d.Scope.Fields {
		if _, ok := defaults[f.Name]; !ok {
			defaults[f.Name] = f.Example
		}
	}
	raw, _ := json.Marshal(defaults)
	if _, err := contract.Validate(start.WorkflowType, raw); err != nil {
		return "", fmt.Errorf("the tick's initial_data is refused: %w", err)
	}
	return start.WorkflowType, nil
}

// goRuntime is the Cloud Functions runtime of the Go version go.mod names: go 1.26.x → go126.
func goRuntime(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			parts := strings.SplitN(v, ".", 3)
			if len(parts) >= 2 {
				return "go" + parts[0] + parts[1], nil
			}
		}
	}
	return "", fmt.Errorf("go.mod names no go version")
}

// EnvRead is every environment variable name the code at root could read: each string literal
// shaped like one (upper case words joined by underscores) in a non-test Go file. It is a
// superset of what is read — a name in a message counts too — so a finding against it is a
// variable nothing reads.
func EnvRead(root string) (map[string]bool, error) {
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "terraform" || n == "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(s) {
					names[s] = true
				}
			}
			return true
		})
		return nil
	})
	return names, err
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// locate names a place in the module as FILE:LINE: the first line of a .tf file that holds
// literal (when not ""), else the attribute at path of r's resource block, else the block.
func (m *Module) locate(literal string, r PlannedResource, path string) string {
	if literal != "" {
		files, _ := filepath.Glob(filepath.Join(m.Dir, "*.tf"))
		more, _ := filepath.Glob(filepath.Join(m.Dir, "*.tf.json"))
		for _, f := range append(files, more...) {
			src, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if i := strings.Index(string(src), literal); i >= 0 {
				return fmt.Sprintf("%s:%d", filepath.Base(f), strings.Count(string(src[:i]), "\n")+1)
			}
		}
	}
	b, ok := m.Resource(r.Type, r.Name)
	if !ok {
		return "?"
	}
	if path != "" {
		if e, ok := Attr(b.Body, path); ok {
			rng := e.Range()
			return fmt.Sprintf("%s:%d", filepath.Base(rng.Filename), rng.Start.Line)
		}
	}
	return fmt.Sprintf("%s:%d", b.File, b.Body.SrcRange.Start.Line)
}

func checkPlanTopics(p *Plan, m *Module) []Finding {
	var out []Finding
	created := map[string]bool{}
	for _, t := range p.Of("google_pubsub_topic") {
		created[t.str("name")] = true
	}
	for _, want := range []string{pipeline.TicksDefault, pipeline.SweepsDefault, pipeline.SyncsDefault, pipeline.EndsDefault} {
		if !created[want] {
			res := PlannedResource{Type: "google_pubsub_topic", Name: strings.TrimPrefix(want, defaultPrefix+"-")}
			out = append(out, Finding{"topics", m.locate("", res, "name") + ": topic " + want + " is not created"})
		}
	}
	return out
}

func checkPlanRoles(p *Plan, m *Module, s PlanSetting) []Finding {
	var out []Finding
	add := func(at, rule, format string, args ...any) {
		out = append(out, Finding{rule, at + ": " + fmt.Sprintf(format, args...)})
	}
	roles := p.Of("google_project_iam_custom_role")
	if len(roles) != 1 {
		add(m.locate("", PlannedResource{Type: "google_project_iam_custom_role", Name: "runtime"}, ""), "custom role", "%d custom roles planned, want the runtime's one", len(roles))
	}
	want := executorPermissions(s.Kubernetes)
	for _, r := range roles {
		got := r.strs("permissions")
		for _, perm := range got {
			if !slices.Contains(want, perm) {
				add(m.locate(strconv.Quote(perm), r, "permissions"), "custom role", "%s (kubernetes %t) holds %s, which no call of the code needs (cloudrun/kubejobs IAMPermissions)", r.Address, s.Kubernetes, perm)
			}
		}
		for _, perm := range want {
			if !slices.Contains(got, perm) {
				add(m.locate("", r, "permissions"), "custom role", "%s (kubernetes %t) lacks %s, which the code's calls need", r.Address, s.Kubernetes, perm)
			}
		}
	}
	firestore := fmt.Sprintf(`resource.name == "projects/%s/databases/%s"`, s.Project, FirestoreDatabaseDefault)
	sources := fmt.Sprintf(`resource.name == "projects/_/buckets/gcf-v2-sources-%[1]s-%[2]s" || resource.name.startsWith("projects/_/buckets/gcf-v2-sources-%[1]s-%[2]s/objects/")`,
		tfstandin.PlausibleString("number"), s.Region)
	allowed := map[string]string{"roles/datastore.user": firestore, "roles/logging.logWriter": "", "roles/storage.objectViewer": sources}
	datastore := false
	for _, r := range p.Resources {
		if r.Mode != "managed" || !strings.HasSuffix(r.Type, "_iam_member") {
			continue
		}
		role, cond := r.str("role"), r.str("condition.expression")
		at := m.locate(strconv.Quote(role), r, "role")
		if slices.Contains(broadRoles, role) {
			add(at, "project roles", "%s grants %s", r.Address, role)
			continue
		}
		if r.Type != "google_project_iam_member" || !strings.HasPrefix(role, "roles/") {
			continue
		}
		wantCond, ok := allowed[role]
		switch {
		case !ok:
			add(at, "project roles", "%s: predefined role %s on the project", r.Address, role)
		case cond != wantCond && role == "roles/datastore.user":
			add(m.locate("", r, "condition.expression"), "firestore", "%s: roles/datastore.user with condition %q, want %q: the functions would reach other databases", r.Address, cond, wantCond)
		case cond != wantCond:
			add(m.locate("", r, "condition.expression"), "project roles", "%s: %s with condition %q, want %q", r.Address, role, cond, wantCond)
		}
		datastore = datastore || role == "roles/datastore.user"
	}
	if !datastore {
		add(m.locate("", PlannedResource{Type: "google_project_iam_member", Name: "runtime_firestore"}, ""), "firestore", "no grant of roles/datastore.user: the functions cannot reach Firestore")
	}
	return out
}

// FirestoreDatabaseDefault is var.firestore_database's default, which the plans use.
const FirestoreDatabaseDefault = "(default)"

func checkPlanAuth(p *Plan, m *Module, s PlanSetting) []Finding {
	var out []Finding
	var fn *PlannedResource
	for _, f := range p.Of("google_cloudfunctions2_function") {
		if f.str("build_config.entry_point") == "StartWorkflow" {
			fn = &f
		}
	}
	if fn == nil {
		return nil // the functions check reports it
	}
	env := fn.strMap("service_config.environment_variables")
	name := fn.str("name")
	audiences := []string{
		fmt.Sprintf("https://%s-%s.cloudfunctions.net/%s", s.Region, s.Project, name),
		fmt.Sprintf("https://%s-%s.%s.run.app", name, tfstandin.PlausibleString("number"), s.Region),
	}
	if got := env["STALESWEEP_AUTH_AUDIENCE"]; got != strings.Join(audiences, ",") {
		out = append(out, Finding{"auth", m.locate("STALESWEEP_AUTH_AUDIENCE", *fn, "") + fmt.Sprintf(": %s: STALESWEEP_AUTH_AUDIENCE=%q, want StartWorkflow's own URLs %q", fn.Address, got, strings.Join(audiences, ","))})
	}
	var callers, ids []string
	for _, op := range s.Operators {
		kind, email, _ := strings.Cut(op, ":")
		if kind == "user" || kind == "serviceAccount" {
			callers = append(callers, email)
		}
		if kind == "serviceAccount" {
			ids = append(ids, tfstandin.PlausibleString("unique_id"))
		}
	}
	want := strings.Join(slices.Compact(append(callers, ids...)), ",")
	if got := env["STALESWEEP_ALLOWED_CALLERS"]; got != want {
		out = append(out, Finding{"auth", m.locate("STALESWEEP_ALLOWED_CALLERS", *fn, "") + fmt.Sprintf(": %s: STALESWEEP_ALLOWED_CALLERS=%q, want the operators' emails and their service accounts' unique ids %q", fn.Address, got, want)})
	}
	return out
}

func checkPlanIndexes(p *Plan, m *Module) []Finding {
	var out []Finding
	render := func(coll string, fields []string) string { return coll + "(" + strings.Join(fields, ", ") + ")" }
	var got []string
	for _, r := range p.Of("google_firestore_index") {
		var fields []string
		l, _ := r.Values["fields"].([]any)
		for _, f := range l {
			fm, _ := f.(map[string]any)
			path, _ := fm["field_path"].(string)
			order, _ := fm["order"].(string)
			fields = append(fields, path+" "+order)
		}
		got = append(got, render(r.str("collection"), fields))
	}
	for _, ix := range indexes.Composite() {
		var fields []string
		for _, f := range ix.Fields {
			fields = append(fields, f.Path+" "+string(f.Order))
		}
		w := render(ix.Collection, fields)
		if !slices.Contains(got, w) {
			out = append(out, Finding{"indexes", m.locate(`"collection": `+strconv.Quote(ix.Collection), PlannedResource{}, "") + ": the plan does not create " + w + " (" + ix.Query + ")"})
		}
		got = slices.DeleteFunc(got, func(g string) bool { return g == w })
	}
	for _, g := range got {
		out = append(out, Finding{"indexes", "firestore_indexes.tf.json: the plan creates " + g + ", which no query needs"})
	}
	return out
}

// checkPlanAlerts: every metric of alerts.Metrics is planned as a logs-based metric that counts
// its event's lines of the module's own functions (their gen2 resource type and each planned
// function's service name) and extracts each of its labels from its field; each alerting one
// has a policy on that metric; one dashboard charts them all.
func checkPlanAlerts(p *Plan, m *Module) []Finding {
	var out []Finding
	add := func(name, format string, args ...any) {
		out = append(out, Finding{"alerts", m.locate(strconv.Quote(name)+": {", PlannedResource{}, "") + ": " + fmt.Sprintf(format, args...)})
	}
	var fns []string
	for _, fn := range p.Of("google_cloudfunctions2_function") {
		fns = append(fns, fn.str("name"))
	}
	planned := map[string]PlannedResource{}
	for _, r := range p.Of("google_logging_metric") {
		planned[r.Name] = r
	}
	policies := map[string]PlannedResource{}
	for _, r := range p.Of("google_monitoring_alert_policy") {
		policies[r.Name] = r
	}
	dashboards := p.Of("google_monitoring_dashboard")
	if len(dashboards) != 1 {
		out = append(out, Finding{"alerts", fmt.Sprintf("alerts.tf.json: the plan creates %d dashboards, want one", len(dashboards))})
	}
	for _, metric := range alerts.Metrics {
		r, ok := planned[metric.Name]
		if !ok {
			out = append(out, Finding{"alerts", "alerts.tf.json: the plan creates no google_logging_metric." + metric.Name + " (internal/alerts lists it)"})
			continue
		}
		name, filter := r.str("name"), r.str("filter")
		if !strings.HasSuffix(name, "/"+metric.Name) {
			add(metric.Name, "%s: named %q, want PREFIX/%s", r.Address, name, metric.Name)
		}
		if !strings.Contains(filter, `resource.type="cloud_run_revision"`) || !strings.Contains(filter, metric.Filter()) {
			add(metric.Name, "%s: filter %q does not count the gen2 functions' lines of %s (%s)", r.Address, filter, metric.Event, metric.Filter())
		}
		for _, fn := range fns {
			if !strings.Contains(filter, fn+"|") && !strings.Contains(filter, fn+")") {
				add(metric.Name, "%s: filter %q leaves out function %s", r.Address, filter, fn)
			}
		}
		ex := r.strMap("label_extractors")
		for _, l := range metric.Labels {
			if want := "EXTRACT(jsonPayload." + l.Field + ")"; ex[l.Key] != want {
				add(metric.Name, "%s: label %s is extracted by %q, want %s", r.Address, l.Key, ex[l.Key], want)
			}
		}
		typ := "logging.googleapis.com/user/" + name
		if metric.Alert != nil {
			pol, ok := policies[metric.Name]
			if !ok || !strings.Contains(pol.str("conditions.condition_threshold.filter"), `metric.type="`+typ+`"`) {
				add(metric.Name, "no alert policy on %s", typ)
			}
		}
		if len(dashboards) == 1 && !strings.Contains(dashboards[0].str("dashboard_json"), typ) {
			add(metric.Name, "the dashboard does not chart %s", typ)
		}
	}
	return out
}

// checkPlanTTL holds the plan's google_firestore_field resources to indexes.Expiring:
// each collection's expiry field has a TTL policy and the one ascending index gc's query runs
// on, and no other field has a policy (a TTL on a row the runners own would delete their rows).
func checkPlanTTL(p *Plan, m *Module) []Finding {
	var out []Finding
	want := map[string]string{}
	for _, e := range indexes.Expiring() {
		scope := "COLLECTION"
		if e.Group {
			scope = "COLLECTION_GROUP"
		}
		want[e.Collection] = scope
	}
	seen := map[string]bool{}
	for _, r := range p.Of("google_firestore_field") {
		coll, field := r.str("collection"), r.str("field")
		at := m.locate(strconv.Quote(r.Name)+": {", r, "")
		scope, ok := want[coll]
		ttl, _ := r.Values["ttl_config"].([]any)
		switch {
		case len(ttl) == 0:
			continue // an index override, not a TTL policy
		case !ok || field != ledger.ExpireField:
			out = append(out, Finding{"ttl", fmt.Sprintf("%s: %s: a TTL policy on %s.%s, which is not stalesweep's bookkeeping (%s of indexes.Expiring)", at, r.Address, coll, field, ledger.ExpireField)})
			continue
		}
		seen[coll] = true
		order, _ := r.at("index_config.indexes.order").(string)
		qs, _ := r.at("index_config.indexes.query_scope").(string)
		if ixs, _ := r.at("index_config.indexes").([]any); len(ixs) != 1 || order != "ASCENDING" || qs != scope {
			out = append(out, Finding{"ttl", fmt.Sprintf("%s: %s: index_config must keep exactly the ascending %s index gc queries %s.%s with", at, r.Address, scope, coll, field)})
		}
	}
	for _, e := range indexes.Expiring() {
		if !seen[e.Collection] {
			out = append(out, Finding{"ttl", fmt.Sprintf("firestore_ttl.tf.json: the plan declares no TTL policy on %s.%s (%s)", e.Collection, ledger.ExpireField, e.What)})
		}
	}
	return out
}

func checkPlanSinks(p *Plan, m *Module, s PlanSetting) []Finding {
	var out []Finding
	var sinks []PlannedResource
	for _, scope := range []string{"project", "folder", "organization"} {
		sinks = append(sinks, p.Of("google_logging_"+scope+"_sink")...)
	}
	if len(sinks) != 1 {
		out = append(out, Finding{"sinks", m.locate("", PlannedResource{Type: "google_logging_project_sink", Name: "ends"}, "") +
			fmt.Sprintf(": %d log sinks planned, want the event path's one", len(sinks))})
	}
	for _, r := range sinks {
		if got, want := r.str("filter"), WantSinkFilter(s.Kubernetes); got != want {
			out = append(out, Finding{"sinks", m.locate("", r, "filter") + fmt.Sprintf(": %s (kubernetes %t) filters %q, the code's signals generate %q", r.Address, s.Kubernetes, got, want)})
		}
	}
	return out
}
