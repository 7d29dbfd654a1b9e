package deploycheck

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stalesweep/stalesweep/emulator/localpipeline"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// Finding is one broken rule.
type Finding struct {
	Rule   string
	Detail string
}

func (f Finding) String() string { return f.Rule + ": " + f.Detail }

// defaultPrefix is var.name_prefix's default, which the code's default topic names assume.
const defaultPrefix = "stalesweep"

// RegisteredTargets reads the function targets the Go files of dir register in init:
// functions.HTTP("Name", ...) and functions.CloudEvent("Name", ...).
func RegisteredTargets(dir string) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", dir, err)
	}
	var out []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "HTTP" && sel.Sel.Name != "CloudEvent") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "functions" {
					return true
				}
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, _ := strconv.Unquote(lit.Value)
					out = append(out, name)
				}
				return true
			})
		}
	}
	sort.Strings(out)
	return out, nil
}

type fn struct{ key, entryPoint, topic string }

func (m *Module) functions() ([]fn, error) {
	l, ok := m.Local("functions")
	if !ok {
		return nil, fmt.Errorf("no local.functions")
	}
	v, err := m.Eval(l, map[string]cty.Value{"name_prefix": cty.StringVal(defaultPrefix)})
	if err != nil {
		return nil, err
	}
	var out []fn
	for k, f := range v.AsValueMap() {
		e := fn{key: k}
		if ep := f.GetAttr("entry_point"); ep.Type() == cty.String && ep.IsKnown() && !ep.IsNull() {
			e.entryPoint = ep.AsString()
		}
		if t := f.GetAttr("topic"); !t.IsNull() {
			e.topic = t.AsString()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

// CheckTargets: every registered target is deployed with that entry point, every deployed
// entry point is registered, each event target is triggered by the topic the pipeline sends it,
// and the runtime is go126.
func CheckTargets(m *Module, registered []string) []Finding {
	var out []Finding
	fns, err := m.functions()
	if err != nil {
		return []Finding{{"targets", err.Error()}}
	}
	var deployed []string
	for _, f := range fns {
		deployed = append(deployed, f.entryPoint)
	}
	sort.Strings(deployed)
	for _, r := range registered {
		if !slices.Contains(deployed, r) {
			out = append(out, Finding{"targets", fmt.Sprintf("target %s is registered in functions/ but not deployed", r)})
		}
	}
	for _, d := range deployed {
		if !slices.Contains(registered, d) {
			out = append(out, Finding{"targets", fmt.Sprintf("entry point %q is deployed but not registered in functions/", d)})
		}
	}
	res, ok := m.Resource("google_cloudfunctions2_function", "fn")
	if !ok {
		return append(out, Finding{"targets", "no google_cloudfunctions2_function.fn"})
	}
	if e, ok := res.Body.Attributes["for_each"]; !ok || m.Render(e.Expr) == "" || !isLocal(e.Expr, "functions") {
		out = append(out, Finding{"targets", "google_cloudfunctions2_function.fn is not for_each = local.functions"})
	}
	if e, ok := Attr(res.Body, "build_config.entry_point"); !ok || m.Render(e) != "${each.value.entry_point}" {
		out = append(out, Finding{"targets", "build_config.entry_point is not each.value.entry_point"})
	}
	if e, ok := Attr(res.Body, "build_config.runtime"); !ok || m.Render(e) != "go126" {
		out = append(out, Finding{"targets", "build_config.runtime is not go126"})
	}
	topicsLocal, _ := m.Local("topics")
	topics, err := m.Eval(topicsLocal, map[string]cty.Value{"name_prefix": cty.StringVal(defaultPrefix)})
	if err != nil {
		return append(out, Finding{"targets", "local.topics: " + err.Error()})
	}
	routes := localpipeline.Routes(pipeline.Topics{})
	for _, f := range fns {
		var want string
		for _, r := range routes {
			if r.Target == f.entryPoint {
				want = r.Topic
			}
		}
		got := ""
		if f.topic != "" {
			if v, ok := topics.AsValueMap()[f.topic]; ok {
				got = v.AsString()
			} else {
				got = "<no topic " + f.topic + ">"
			}
		}
		if got != want {
			out = append(out, Finding{"targets", fmt.Sprintf("%s is triggered by %q, the pipeline sends it %q", f.entryPoint, got, want)})
		}
	}
	return out
}

func isLocal(e hclsyntax.Expression, name string) bool {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	return ok && traversal(t.Traversal) == "local."+name
}

// Identities, as their member strings render.
var (
	runtimeSA   = "serviceAccount:${google_service_account.runtime.email}"
	triggerSA   = "serviceAccount:${google_service_account.trigger.email}"
	schedulerSA = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
	pubsubAgent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
	invokers    = "${each.value}" // of var.start_workflow_invokers
)

// topicResource finds the google_pubsub_topic whose name is the given default topic name.
func (m *Module) topicResource(name string) (string, bool) {
	for _, t := range m.Resources("google_pubsub_topic") {
		if a, ok := t.Body.Attributes["name"]; ok && strings.ReplaceAll(m.Render(a.Expr), "${var.name_prefix}", defaultPrefix) == name {
			return t.Labels[1], true
		}
	}
	return "", false
}

// CheckTopics: every topic the code publishes to exists, and its publisher may publish to it:
// the runtime account to sweeps and syncs, the Cloud Scheduler agent to ticks.
func CheckTopics(m *Module) []Finding {
	var out []Finding
	for _, want := range []struct{ topic, member string }{
		{pipeline.SweepsDefault, runtimeSA}, {pipeline.SyncsDefault, runtimeSA}, {pipeline.TicksDefault, schedulerSA},
	} {
		res, ok := m.topicResource(want.topic)
		if !ok {
			out = append(out, Finding{"topics", fmt.Sprintf("topic %s is not created", want.topic)})
			continue
		}
		grant := fmt.Sprintf("%s|roles/pubsub.publisher|topic:${google_pubsub_topic.%s.id}", want.member, res)
		if !slices.Contains(m.grants(false), grant) {
			out = append(out, Finding{"topics", fmt.Sprintf("%s may not publish to %s", want.member, want.topic)})
		}
	}
	return out
}

// grants lists every IAM grant of the module as member|role|target, for_each expanded, with
// var.enable_kubernetes set to kube.
func (m *Module) grants(kube bool) []string {
	var out []string
	vars := map[string]cty.Value{"enable_kubernetes": cty.BoolVal(kube), "enable_dead_letter": cty.True, "name_prefix": cty.StringVal(defaultPrefix)}
	for _, b := range m.resources {
		typ := b.Labels[0]
		if !strings.Contains(typ, "_iam_") {
			continue
		}
		if c, ok := b.Body.Attributes["count"]; ok {
			if v, err := m.Eval(c.Expr, vars); err == nil && v.Type() == cty.Number && v.AsBigFloat().Sign() == 0 {
				continue // switched off
			}
		}
		target := ""
		for _, k := range []string{"project", "topic", "service", "subscription", "bucket"} {
			if a, ok := b.Body.Attributes[k]; ok && k != "project" {
				target = k + ":" + m.Render(a.Expr)
			}
		}
		if target == "" {
			target = "project"
		}
		member, role := "", ""
		if a, ok := b.Body.Attributes["member"]; ok {
			member = m.Render(a.Expr)
		}
		if a, ok := b.Body.Attributes["role"]; ok {
			role = m.Render(a.Expr)
		}
		if a, ok := b.Body.Attributes["members"]; ok { // bindings and policies: each member counts
			member = m.Render(a.Expr)
		}
		roles := []string{role}
		if role == "${each.value}" {
			roles = nil
			if fe, ok := b.Body.Attributes["for_each"]; ok {
				if v, err := m.Eval(fe.Expr, vars); err == nil && v.CanIterateElements() {
					for it := v.ElementIterator(); it.Next(); {
						_, e := it.Element()
						roles = append(roles, e.AsString())
					}
				}
			}
		}
		for _, r := range roles {
			out = append(out, fmt.Sprintf("%s|%s|%s", member, r, target))
		}
	}
	sort.Strings(out)
	return out
}

// CheckRoles: each identity has exactly its roles, on exactly its resources.
func CheckRoles(m *Module) []Finding {
	var out []Finding
	for _, kube := range []bool{false, true} {
		want := []string{
			runtimeSA + "|roles/datastore.user|project",
			runtimeSA + "|roles/run.viewer|project",
			runtimeSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.sweeps.id}",
			runtimeSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.syncs.id}",
			schedulerSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.ticks.id}",
			pubsubAgent + "|roles/pubsub.publisher|topic:${google_pubsub_topic.dead_letter.id}",
			triggerSA + `|roles/run.invoker|service:${google_cloudfunctions2_function.fn[each.key].service_config[0].service}`,
			invokers + `|roles/run.invoker|service:${google_cloudfunctions2_function.fn["start_workflow"].service_config[0].service}`,
		}
		if kube {
			want = append(want, runtimeSA+"|roles/container.clusterViewer|project")
		}
		sort.Strings(want)
		got := m.grants(kube)
		for _, g := range got {
			if !slices.Contains(want, g) {
				out = append(out, Finding{"roles", fmt.Sprintf("unexpected grant (kubernetes %t): %s", kube, g)})
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				out = append(out, Finding{"roles", fmt.Sprintf("missing grant (kubernetes %t): %s", kube, w)})
			}
		}
	}
	// The trigger account invokes the event functions only, and StartWorkflow is not one.
	for _, b := range m.Resources("google_cloud_run_service_iam_member") {
		if a, ok := b.Body.Attributes["member"]; ok && m.Render(a.Expr) == triggerSA {
			if fe, ok := b.Body.Attributes["for_each"]; !ok || !isLocal(fe.Expr, "event_functions") {
				out = append(out, Finding{"roles", "the trigger account's run.invoker is not limited to local.event_functions"})
			}
		}
	}
	return out
}

// CheckNoPublic: no attribute of any resource names allUsers or allAuthenticatedUsers.
func CheckNoPublic(m *Module) []Finding {
	var out []Finding
	var walk func(name string, b *hclsyntax.Body)
	walk = func(name string, b *hclsyntax.Body) {
		for attr, a := range b.Attributes {
			text := m.Render(a.Expr) + exprText(a.Expr)
			if strings.Contains(text, "allUsers") || strings.Contains(text, "allAuthenticatedUsers") {
				out = append(out, Finding{"public", fmt.Sprintf("%s.%s grants public access", name, attr)})
			}
		}
		for _, nb := range b.Blocks {
			walk(name+"."+nb.Type, nb.Body)
		}
	}
	for key, b := range m.resources {
		walk(key, b.Body)
	}
	return out
}

// exprText is the expression's source words, for literals nested in lists and maps.
func exprText(e hclsyntax.Expression) string {
	var sb strings.Builder
	_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
		if l, ok := n.(*hclsyntax.LiteralValueExpr); ok && l.Val.Type() == cty.String {
			sb.WriteString(l.Val.AsString() + " ")
		}
		return nil
	})
	return sb.String()
}

// CheckIndexes: the module declares exactly the composite indexes the code's queries need.
func CheckIndexes(m *Module, want []ledger.Index) []Finding {
	var out []Finding
	render := func(coll string, fields []string) string { return coll + "(" + strings.Join(fields, ", ") + ")" }
	var got []string
	for name, raw := range m.JSONResources["google_firestore_index"] {
		var ix struct {
			Collection string `json:"collection"`
			Fields     []struct {
				FieldPath string `json:"field_path"`
				Order     string `json:"order"`
			} `json:"fields"`
		}
		if err := json.Unmarshal(raw, &ix); err != nil {
			out = append(out, Finding{"indexes", fmt.Sprintf("index %s: %v", name, err)})
			continue
		}
		var fields []string
		for _, f := range ix.Fields {
			fields = append(fields, f.FieldPath+" "+f.Order)
		}
		got = append(got, render(ix.Collection, fields))
	}
	for _, ix := range want {
		var fields []string
		for _, f := range ix.Fields {
			fields = append(fields, f.Path+" "+string(f.Order))
		}
		w := render(ix.Collection, fields)
		if !slices.Contains(got, w) {
			out = append(out, Finding{"indexes", "the module does not declare " + w + " (" + ix.Query + ")"})
		}
		got = slices.DeleteFunc(got, func(g string) bool { return g == w })
	}
	for _, g := range got {
		out = append(out, Finding{"indexes", "the module declares " + g + ", which no query needs"})
	}
	return out
}

// All runs every check of the module in dir against the code in root.
func All(dir, root string) ([]Finding, error) {
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	targets, err := RegisteredTargets(filepath.Join(root, "functions"))
	if err != nil {
		return nil, err
	}
	var out []Finding
	out = append(out, CheckTargets(m, targets)...)
	out = append(out, CheckTopics(m)...)
	out = append(out, CheckRoles(m)...)
	out = append(out, CheckNoPublic(m)...)
	out = append(out, CheckIndexes(m, ledger.Indexes())...)
	return out, nil
}
