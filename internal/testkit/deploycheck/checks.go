package deploycheck

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
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
	pkgs, err := parser.ParseDir(fset, dir, //nolint:staticcheck // SA1019: every file registering a target counts, build tags aside
		func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
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

// CheckTargets: each event target is triggered by the topic the pipeline sends it. Which topic a
// function's trigger names is known on the plan only after apply (a topic's id), so this stays
// on the HCL; CheckPlan holds the entry points and the runtime.
func CheckTargets(m *Module) []Finding {
	var out []Finding
	fns, err := m.functions()
	if err != nil {
		return []Finding{{"targets", err.Error()}}
	}
	topicsLocal, _ := m.Local("topics")
	topics, err := m.Eval(topicsLocal, map[string]cty.Value{"name_prefix": cty.StringVal(defaultPrefix)})
	if err != nil {
		return append(out, Finding{"targets", "local.topics: " + err.Error()})
	}
	routes := pipeline.Routes(pipeline.Topics{})
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
	buildSA     = "serviceAccount:${google_service_account.build.email}"
	triggerSA   = "serviceAccount:${google_service_account.trigger.email}"
	schedulerSA = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-cloudscheduler.iam.gserviceaccount.com"
	pubsubAgent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
	invokers    = "${each.value}" // of var.start_workflow_invokers
)

// The conditions grants must carry, as they render.
var (
	// roles/datastore.user: the one database the functions are configured with.
	firestoreCondition = `resource.name == "projects/${var.project_id}/databases/${var.firestore_database}"`
	// The build's storage.objectViewer: the bucket Cloud Functions copies the source into.
	gcfSourcesCondition = `resource.name == "projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.region}" || ` +
		`resource.name.startsWith("projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.region}/objects/")`
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

// CheckTopics: each publisher of a topic the code publishes to may publish to it: the runtime
// account to sweeps, syncs and ticks (Dispatch's continuations), the Cloud Scheduler agent to
// ticks.
func CheckTopics(m *Module) []Finding {
	var out []Finding
	for _, want := range []struct{ topic, member string }{
		{pipeline.SweepsDefault, runtimeSA}, {pipeline.SyncsDefault, runtimeSA}, {pipeline.TicksDefault, runtimeSA}, {pipeline.TicksDefault, schedulerSA},
	} {
		res, ok := m.topicResource(want.topic)
		if !ok {
			continue // CheckPlan reports a topic that is not created
		}
		grant := fmt.Sprintf("%s|roles/pubsub.publisher|topic:${google_pubsub_topic.%s.id}", want.member, res)
		if !slices.Contains(m.grants(setting{}), grant) {
			out = append(out, Finding{"topics", fmt.Sprintf("%s may not publish to %s", want.member, want.topic)})
		}
	}
	return out
}

// setting is one combination of the variables that switch grants on and off.
type setting struct {
	kube         bool   // var.enable_kubernetes
	secret       bool   // var.kube_clusters_secret set
	tokenCreator bool   // var.pubsub_agent_token_creator
	sinkScope    string // var.log_sink_scope: "project" (or "", its default), "folder", "organization"
}

func (s setting) String() string {
	out := fmt.Sprintf("kubernetes %t, secret %t, token creator %t", s.kube, s.secret, s.tokenCreator)
	if s.scope() != "project" {
		out += ", log sink in a " + s.sinkScope
	}
	return out
}

func (s setting) scope() string { return cmp.Or(s.sinkScope, "project") }

// settings are the combinations CheckRoles holds the module to.
func settings() []setting {
	var out []setting
	for _, kube := range []bool{false, true} {
		for _, secret := range []bool{false, true} {
			for _, tc := range []bool{false, true} {
				for _, scope := range []string{"project", "folder", "organization"} {
					out = append(out, setting{kube, secret, tc, scope})
				}
			}
		}
	}
	return out
}

func (s setting) vars() map[string]cty.Value {
	secret := ""
	if s.secret {
		secret = "stalesweep-kube-clusters"
	}
	return map[string]cty.Value{
		"enable_kubernetes": cty.BoolVal(s.kube), "enable_dead_letter": cty.True, "name_prefix": cty.StringVal(defaultPrefix),
		"kube_clusters": cty.StringVal(""), "kube_clusters_secret": cty.StringVal(secret),
		"pubsub_agent_token_creator": cty.BoolVal(s.tokenCreator), "enable_apis": cty.True,
		"log_sink_scope": cty.StringVal(s.scope()), "log_sink_parent_id": cty.StringVal(sinkParent[s.scope()]),
	}
}

// sinkParent is the folder or organization id a setting's sink lives in.
var sinkParent = map[string]string{"project": "", "folder": "folders/4242", "organization": "4343"}

// grantTargets are the attributes that name what an IAM resource grants on (project aside).
var grantTargets = []string{"topic", "service", "subscription", "bucket", "secret_id", "service_account_id", "repository"}

// grants lists every IAM grant of the module as member|role|target, for_each expanded, with the
// variables of s; a conditioned grant ends in |if:EXPRESSION, and a custom role of the module
// renders as custom:NAME{permission,...} with its permissions under s.
func (m *Module) grants(s setting) []string {
	var out []string
	vars := s.vars()
	for _, b := range m.resources {
		typ := b.Labels[0]
		if !strings.Contains(typ, "_iam_") || typ == "google_project_iam_custom_role" {
			continue
		}
		if c, ok := b.Body.Attributes["count"]; ok {
			if v, err := m.Eval(c.Expr, vars); err == nil && v.Type() == cty.Number && v.AsBigFloat().Sign() == 0 {
				continue // switched off
			}
		}
		// A project IAM resource grants on the project whatever else it says; any other names
		// its resource in one of grantTargets (or is an organization's or folder's: its type).
		target := typ
		if strings.HasPrefix(typ, "google_project_iam_") {
			target = "project"
		} else {
			for _, k := range grantTargets {
				if a, ok := b.Body.Attributes[k]; ok {
					target = k + ":" + m.Render(a.Expr)
				}
			}
		}
		member, role := "", ""
		if a, ok := b.Body.Attributes["member"]; ok {
			member = m.Render(a.Expr)
		}
		if a, ok := b.Body.Attributes["role"]; ok {
			role = m.customRole(a.Expr, vars)
		}
		if a, ok := b.Body.Attributes["members"]; ok { // bindings and policies: each member counts
			member = m.Render(a.Expr)
		}
		cond := ""
		if e, ok := Attr(b.Body, "condition.expression"); ok {
			cond = "|if:" + m.Render(e)
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
			out = append(out, fmt.Sprintf("%s|%s|%s%s", member, r, target, cond))
		}
	}
	sort.Strings(out)
	return out
}

// customRole renders a role: a reference to a custom role of the module as
// custom:NAME{its permissions under vars}, anything else as Render does.
func (m *Module) customRole(e hclsyntax.Expression, vars map[string]cty.Value) string {
	role := m.Render(e)
	name, ok := strings.CutPrefix(role, "${google_project_iam_custom_role.")
	if !ok {
		return role
	}
	name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "}"), ".id"), ".name")
	perms, err := m.customRolePermissions(name, vars)
	if err != nil {
		return "custom:" + name + "{?}"
	}
	return "custom:" + name + "{" + strings.Join(perms, ",") + "}"
}

// customRolePermissions evaluates a custom role's permissions, sorted.
func (m *Module) customRolePermissions(name string, vars map[string]cty.Value) ([]string, error) {
	b, ok := m.Resource("google_project_iam_custom_role", name)
	if !ok {
		return nil, fmt.Errorf("no google_project_iam_custom_role.%s", name)
	}
	a, ok := b.Body.Attributes["permissions"]
	if !ok {
		return nil, fmt.Errorf("google_project_iam_custom_role.%s has no permissions", name)
	}
	v, err := m.Eval(a.Expr, vars)
	if err != nil {
		return nil, err
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("google_project_iam_custom_role.%s: permissions is not a list", name)
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, p := it.Element()
		if p.Type() != cty.String || p.IsNull() || !p.IsKnown() {
			return nil, fmt.Errorf("google_project_iam_custom_role.%s: a permission is not a string", name)
		}
		out = append(out, p.AsString())
	}
	sort.Strings(out)
	return out, nil
}

// executorPermissions are the permissions the executor adapters declare for their calls.
func executorPermissions(kube bool) []string {
	out := slices.Clone(cloudrun.IAMPermissions)
	if kube {
		out = append(out, kubejobs.IAMPermissions...)
	}
	sort.Strings(out)
	return out
}

// runtimeRole is the runtime's custom role as grants renders it.
func runtimeRole(kube bool) string {
	return "custom:runtime{" + strings.Join(executorPermissions(kube), ",") + "}"
}

// wantGrants is every grant of the module under s: each identity with exactly its grants.
func wantGrants(s setting) []string {
	want := []string{
		runtimeSA + "|" + runtimeRole(s.kube) + "|project",
		runtimeSA + "|roles/datastore.user|project|if:" + firestoreCondition,
		runtimeSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.sweeps.id}",
		runtimeSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.syncs.id}",
		runtimeSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.ticks.id}",
		buildSA + "|roles/logging.logWriter|project",
		buildSA + "|roles/storage.objectViewer|project|if:" + gcfSourcesCondition,
		buildSA + "|roles/artifactregistry.writer|repository:${google_artifact_registry_repository.functions.name}",
		schedulerSA + "|roles/pubsub.publisher|topic:${google_pubsub_topic.ticks.id}",
		pubsubAgent + "|roles/pubsub.publisher|topic:${google_pubsub_topic.dead_letter.id}",
		triggerSA + `|roles/run.invoker|service:${google_cloudfunctions2_function.fn[each.key].service_config[0].service}`,
		invokers + `|roles/run.invoker|service:${google_cloudfunctions2_function.fn["start_workflow"].service_config[0].service}`,
	}
	if s.kube && s.secret {
		want = append(want, runtimeSA+"|roles/secretmanager.secretAccessor|secret_id:${var.kube_clusters_secret}")
	}
	if s.tokenCreator {
		want = append(want, pubsubAgent+"|roles/iam.serviceAccountTokenCreator|service_account_id:${google_service_account.trigger.name}")
	}
	// The event path's sink may publish to the ends topic, and nothing else.
	want = append(want, "${google_logging_"+s.scope()+"_sink.ends[0].writer_identity}|roles/pubsub.publisher|topic:${google_pubsub_topic.ends.id}")
	sort.Strings(want)
	return want
}

// CheckRoles: each identity — runtime, build, trigger, the Cloud Scheduler and Pub/Sub service
// agents, StartWorkflow's invokers — has exactly its grants, on exactly its resources, with
// exactly its conditions, with Kubernetes on and off, the clusters' secret set or not, and the
// Pub/Sub agent's token creator on or off.
func CheckRoles(m *Module) []Finding {
	var out []Finding
	for _, s := range settings() {
		want := wantGrants(s)
		got := m.grants(s)
		for _, g := range got {
			if !slices.Contains(want, g) {
				out = append(out, Finding{"roles", fmt.Sprintf("unexpected grant (%s): %s", s, g)})
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				out = append(out, Finding{"roles", fmt.Sprintf("missing grant (%s): %s", s, w)})
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
	// The build runs as the build account, into the module's repository.
	if fn, ok := m.Resource("google_cloudfunctions2_function", "fn"); ok {
		if e, ok := Attr(fn.Body, "build_config.service_account"); !ok || m.Render(e) != "${google_service_account.build.id}" {
			out = append(out, Finding{"roles", "build_config.service_account is not google_service_account.build.id: the build would run as the project's default build identity"})
		}
		if e, ok := Attr(fn.Body, "build_config.docker_repository"); !ok || m.Render(e) != "${google_artifact_registry_repository.functions.id}" {
			out = append(out, Finding{"roles", "build_config.docker_repository is not google_artifact_registry_repository.functions.id, the one repository the build account may write"})
		}
	}
	return out
}

// broadRoles are refused on any resource: the basic roles, and the predefined roles the custom
// role replaced.
var broadRoles = []string{"roles/owner", "roles/editor", "roles/viewer", "roles/run.viewer", "roles/container.clusterViewer"}

// envValue finds the expression StartWorkflow's environment sets a variable to: in the
// function's service_config.environment_variables, or in a local it merges in.
func (m *Module) envValue(fn Block, name string) (hclsyntax.Expression, bool) {
	env, ok := Attr(fn.Body, "service_config.environment_variables")
	if !ok {
		return nil, false
	}
	var found hclsyntax.Expression
	seen := map[string]bool{}
	var search func(e hclsyntax.Expression)
	search = func(e hclsyntax.Expression) {
		_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
			switch x := n.(type) {
			case *hclsyntax.ObjectConsExpr:
				for _, it := range x.Items {
					k, ok := refPath(it.KeyExpr)
					if !ok {
						if v, diags := it.KeyExpr.Value(nil); !diags.HasErrors() && v.Type() == cty.String {
							k, ok = v.AsString(), true
						}
					}
					if ok && k == name && found == nil {
						found = it.ValueExpr
					}
				}
			case *hclsyntax.ScopeTraversalExpr:
				if p := traversal(x.Traversal); strings.HasPrefix(p, "local.") && !seen[p] {
					seen[p] = true
					if l, ok := m.local(p); ok {
						search(l)
					}
				}
			}
			return nil
		})
	}
	search(env)
	return found, found != nil
}

// CheckStartWorkflowAuth: where StartWorkflow's authentication settings come from, which a plan
// cannot show (CheckPlan holds their values): STALESWEEP_AUTH_AUDIENCE is not "request";
// STALESWEEP_AUTH_ACCEPT_GCLOUD comes from var.accept_gcloud_tokens; STALESWEEP_ALLOWED_CALLERS
// derives from var.start_workflow_invokers and the invokers' unique ids, looked up by
// data.google_service_account.invokers for each service account among them.
func CheckStartWorkflowAuth(m *Module) []Finding {
	var out []Finding
	fn, ok := m.Resource("google_cloudfunctions2_function", "fn")
	if !ok {
		return []Finding{{"auth", "no google_cloudfunctions2_function.fn"}}
	}
	if e, ok := m.envValue(fn, "STALESWEEP_AUTH_AUDIENCE"); ok && slices.Contains(strings.Fields(exprText(e)), "request") {
		out = append(out, Finding{"auth", "STALESWEEP_AUTH_AUDIENCE is \"request\": an audience taken from the request's Host header is the caller's to choose"})
	}

	if e, ok := m.envValue(fn, "STALESWEEP_AUTH_ACCEPT_GCLOUD"); !ok || !slices.Contains(m.References(e), "var.accept_gcloud_tokens") {
		out = append(out, Finding{"auth", "STALESWEEP_AUTH_ACCEPT_GCLOUD does not come from var.accept_gcloud_tokens"})
	}

	if e, ok := m.envValue(fn, "STALESWEEP_ALLOWED_CALLERS"); !ok {
		out = append(out, Finding{"auth", "STALESWEEP_ALLOWED_CALLERS is not set: StartWorkflow refuses every caller"})
	} else {
		refs := m.References(e)
		if !slices.Contains(refs, "var.start_workflow_invokers") {
			out = append(out, Finding{"auth", "STALESWEEP_ALLOWED_CALLERS does not derive from var.start_workflow_invokers"})
		}
		if !slices.ContainsFunc(refs, func(r string) bool {
			return strings.HasPrefix(r, "data.google_service_account.invokers[") && strings.HasSuffix(r, "].unique_id")
		}) {
			out = append(out, Finding{"auth", "STALESWEEP_ALLOWED_CALLERS lacks the invokers' unique_id (data.google_service_account.invokers): a token minted by impersonation carries only sub"})
		}
	}
	if d, ok := m.Data("google_service_account", "invokers"); !ok {
		out = append(out, Finding{"auth", "no data \"google_service_account\" \"invokers\" to look up the invokers' unique ids"})
	} else {
		fe, ok := d.Body.Attributes["for_each"]
		if !ok || !slices.Contains(m.References(fe.Expr), "var.start_workflow_invokers") {
			out = append(out, Finding{"auth", "data.google_service_account.invokers is not for_each over var.start_workflow_invokers' service accounts"})
		}
		if a, ok := d.Body.Attributes["account_id"]; !ok || m.Render(a.Expr) != "${each.value}" && m.Render(a.Expr) != "${each.key}" {
			out = append(out, Finding{"auth", "data.google_service_account.invokers' account_id is not each service account's email"})
		}
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

// All runs every check of the module in dir that needs its text: what a plan cannot show.
// CheckPlan holds the rest on a resolved plan.
func All(dir string) ([]Finding, error) {
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	var out []Finding
	out = append(out, CheckTargets(m)...)
	out = append(out, CheckTopics(m)...)
	out = append(out, CheckRoles(m)...)
	out = append(out, CheckStartWorkflowAuth(m)...)
	out = append(out, CheckSinks(m)...)
	return out, nil
}

// WantSinkFilter is the filter the event path's sink must hold: the completion signals of the
// executors enabled (app.Signals, Kubernetes' only when it is on), each in parentheses, ORed in
// the order of their providers.
func WantSinkFilter(kube bool) string {
	filters := map[string]string{}
	for _, sig := range app.Signals() {
		if kube || sig.Provider != ledger.ProviderKubernetes {
			filters[sig.Provider] = "(" + sig.Filter.String() + ")"
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(filters)) {
		out = append(out, filters[k])
	}
	return strings.Join(out, " OR ")
}

// CheckSinks: under every setting exactly one sink exists, in the scope var.log_sink_scope
// names, sending to the ends topic exactly the filter the code's signals generate.
func CheckSinks(m *Module) []Finding {
	var out []Finding
	for _, s := range settings() {
		vars := s.vars()
		on := 0
		for _, scope := range []string{"project", "folder", "organization"} {
			b, ok := m.Resource("google_logging_"+scope+"_sink", "ends")
			if !ok {
				out = append(out, Finding{"sinks", "no google_logging_" + scope + "_sink.ends"})
				continue
			}
			if c, ok := b.Body.Attributes["count"]; ok {
				if v, err := m.Eval(c.Expr, vars); err != nil || v.Type() != cty.Number || v.AsBigFloat().Sign() == 0 {
					continue
				}
			}
			on++
			if scope != s.scope() {
				out = append(out, Finding{"sinks", fmt.Sprintf("(%s) a %s sink exists", s, scope)})
			}
			if a, ok := b.Body.Attributes["filter"]; !ok {
				out = append(out, Finding{"sinks", fmt.Sprintf("(%s) the %s sink has no filter: it would send every entry", s, scope)})
			} else if v, err := m.Eval(a.Expr, vars); err != nil || v.Type() != cty.String || v.AsString() != WantSinkFilter(s.kube) {
				out = append(out, Finding{"sinks", fmt.Sprintf("(%s) the %s sink's filter is not what the code's signals generate (%v)", s, scope, err)})
			}
			if a, ok := b.Body.Attributes["destination"]; !ok || m.Render(a.Expr) != "pubsub.googleapis.com/${google_pubsub_topic.ends.id}" {
				out = append(out, Finding{"sinks", fmt.Sprintf("(%s) the %s sink does not send to the ends topic", s, scope)})
			}
		}
		if on != 1 {
			out = append(out, Finding{"sinks", fmt.Sprintf("(%s) %d sinks exist, want one", s, on)})
		}
	}
	return out
}
