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

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/message"
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

// str reads a string at a path of nested blocks and attributes ("build_config.entry_point": a
// single nested block is a list of one).
func (r PlannedResource) str(path string) string {
	var v any = r.Values
	for _, part := range strings.Split(path, ".") {
		if l, ok := v.([]any); ok {
			if len(l) == 0 {
				return ""
			}
			v = l[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[part]
	}
	s, _ := v.(string)
	return s
}

func (r PlannedResource) strMap(path string) map[string]string {
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
	m, _ := v.(map[string]any)
	out := map[string]string{}
	for k, x := range m {
		out[k], _ = x.(string)
	}
	return out
}

// PlanSetting is what a plan was made with, as the policy needs to know it.
type PlanSetting struct {
	Kubernetes bool // enable_kubernetes
}

// CheckPlan holds a resolved plan to the code at root: each finding names the resource.
//   - functions: every registered function target is deployed exactly once, at its own entry
//     point, on the Go runtime go.mod names;
//   - env: every environment variable a function is given is one the code reads, and every
//     STALESWEEP_TOPIC_* names a topic the plan creates;
//   - public: no IAM member anywhere is allUsers or allAuthenticatedUsers;
//   - ticks: every scheduler job publishes, with trigger=schedule, a tick the code decodes, of a
//     workflow type this build declares, whose defaults its input schema accepts; the
//     Kubernetes sync is scheduled exactly when Kubernetes is on.
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
			add(m.locate("", job, "pubsub_target"), "ticks", "%s: %v", job.Address, err)
			continue
		}
		scheduled[tick] = true
	}
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
		for _, b := range m.Blocks {
			src, err := os.ReadFile(filepath.Join(m.Dir, b.File))
			if err != nil {
				continue
			}
			if i := strings.Index(string(src), literal); i >= 0 {
				return fmt.Sprintf("%s:%d", b.File, strings.Count(string(src[:i]), "\n")+1)
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
