// Package deploycheck holds the Terraform module in terraform/ to the code it deploys. Terraform
// cannot validate the module here (the google provider cannot be downloaded), so these checks
// parse the HCL with hashicorp/hcl/v2 and compare what they find with what the code declares:
// the function targets, the topics and who publishes to them, the Firestore indexes, the
// identities and exactly their grants (conditions and custom roles included), the runtime's
// custom role against the permissions the executor adapters declare, the project-level roles,
// StartWorkflow's authentication settings, and that nothing is public.
package deploycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Block is one block of the module: a resource, locals, a variable.
type Block struct {
	Type   string
	Labels []string
	Body   *hclsyntax.Body
	File   string
}

// Module is a parsed module directory.
type Module struct {
	Dir       string
	Blocks    []Block
	locals    map[string]hclsyntax.Expression
	resources map[string]Block // "type.name"
	data      map[string]Block // "type.name" of data sources
	// JSONResources holds the resources of *.tf.json files, decoded as plain JSON.
	JSONResources map[string]map[string]json.RawMessage // type → name → body
}

// Load parses every .tf and .tf.json file of dir (not its subdirectories).
func Load(dir string) (*Module, error) {
	m := &Module{Dir: dir, locals: map[string]hclsyntax.Expression{}, resources: map[string]Block{}, data: map[string]Block{}, JSONResources: map[string]map[string]json.RawMessage{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read module %s: %w", dir, err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".tf.json"):
			if err := m.loadJSON(path); err != nil {
				return nil, err
			}
		case strings.HasSuffix(e.Name(), ".tf"):
			src, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			f, diags := hclsyntax.ParseConfig(src, e.Name(), hcl.InitialPos)
			if diags.HasErrors() {
				return nil, fmt.Errorf("parse %s: %s", path, diags.Error())
			}
			for _, b := range f.Body.(*hclsyntax.Body).Blocks {
				blk := Block{Type: b.Type, Labels: b.Labels, Body: b.Body, File: e.Name()}
				m.Blocks = append(m.Blocks, blk)
				switch b.Type {
				case "locals":
					for name, a := range b.Body.Attributes {
						m.locals[name] = a.Expr
					}
				case "resource":
					m.resources[b.Labels[0]+"."+b.Labels[1]] = blk
				case "data":
					m.data[b.Labels[0]+"."+b.Labels[1]] = blk
				}
			}
		}
	}
	return m, nil
}

func (m *Module) loadJSON(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Resource map[string]map[string]json.RawMessage `json:"resource"`
		Locals   map[string]json.RawMessage            `json:"locals"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	// A generated file's locals are values (log_sinks.tf.json's filters): literals here.
	for name, body := range doc.Locals {
		typ, err := ctyjson.ImpliedType(body)
		if err != nil {
			return fmt.Errorf("parse %s: local %s: %w", path, name, err)
		}
		v, err := ctyjson.Unmarshal(body, typ)
		if err != nil {
			return fmt.Errorf("parse %s: local %s: %w", path, name, err)
		}
		m.locals[name] = &hclsyntax.LiteralValueExpr{Val: v}
	}
	for typ, byName := range doc.Resource {
		if m.JSONResources[typ] == nil {
			m.JSONResources[typ] = map[string]json.RawMessage{}
		}
		for name, body := range byName {
			m.JSONResources[typ][name] = body
		}
	}
	return nil
}

// Resources returns the HCL resources of a type, by name, sorted.
func (m *Module) Resources(typ string) []Block {
	var out []Block
	for _, b := range m.resources {
		if b.Labels[0] == typ {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Labels[1] < out[j].Labels[1] })
	return out
}

// Resource returns one resource.
func (m *Module) Resource(typ, name string) (Block, bool) {
	b, ok := m.resources[typ+"."+name]
	return b, ok
}

// Data returns one data source.
func (m *Module) Data(typ, name string) (Block, bool) {
	b, ok := m.data[typ+"."+name]
	return b, ok
}

// Attr returns an attribute of a block, or of one of its nested blocks ("build_config.entry_point").
func Attr(b *hclsyntax.Body, path string) (hclsyntax.Expression, bool) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		var next *hclsyntax.Body
		for _, nb := range b.Blocks {
			if nb.Type == p {
				next = nb.Body
				break
			}
		}
		if next == nil {
			return nil, false
		}
		b = next
	}
	a, ok := b.Attributes[parts[len(parts)-1]]
	if !ok {
		return nil, false
	}
	return a.Expr, true
}

// Render turns an expression into text: literals as they are, references as ${path}, locals
// expanded. Good enough to compare "serviceAccount:${google_service_account.runtime.email}".
// Function calls and tuples render as name(args) and [items], string arguments and items
// quoted: join(",", ["https://${var.region}-...", ...]).
func (m *Module) Render(e hclsyntax.Expression) string {
	switch x := e.(type) {
	case *hclsyntax.FunctionCallExpr:
		args := make([]string, len(x.Args))
		for i, a := range x.Args {
			args[i] = m.renderItem(a)
		}
		return x.Name + "(" + strings.Join(args, ", ") + ")"
	case *hclsyntax.TupleConsExpr:
		items := make([]string, len(x.Exprs))
		for i, it := range x.Exprs {
			items[i] = m.renderItem(it)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case *hclsyntax.LiteralValueExpr:
		if x.Val.Type() == cty.String {
			return x.Val.AsString()
		}
		return x.Val.GoString()
	case *hclsyntax.TemplateExpr:
		var sb strings.Builder
		for _, p := range x.Parts {
			sb.WriteString(m.Render(p))
		}
		return sb.String()
	case *hclsyntax.TemplateWrapExpr:
		return m.Render(x.Wrapped)
	}
	if path, ok := refPath(e); ok {
		if l, ok := m.local(path); ok {
			return m.Render(l)
		}
		return "${" + path + "}"
	}
	rng := e.Range()
	return fmt.Sprintf("<expr at %s>", rng.String())
}

// renderItem renders an argument or a tuple item: strings quoted, the rest as Render does.
func (m *Module) renderItem(e hclsyntax.Expression) string {
	switch x := e.(type) {
	case *hclsyntax.TemplateExpr, *hclsyntax.TemplateWrapExpr:
		return `"` + m.Render(e) + `"`
	case *hclsyntax.LiteralValueExpr:
		if x.Val.Type() == cty.String {
			return `"` + x.Val.AsString() + `"`
		}
	}
	if path, ok := refPath(e); ok {
		if l, ok := m.local(path); ok {
			return m.renderItem(l)
		}
	}
	return m.Render(e)
}

// References lists every reference an expression makes, as refPath renders it
// (data.google_service_account.invokers[email].unique_id), following locals into their own
// expressions: what a value is derived from.
func (m *Module) References(e hclsyntax.Expression) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(hclsyntax.Expression)
	walk = func(e hclsyntax.Expression) {
		_ = hclsyntax.VisitAll(e, func(n hclsyntax.Node) hcl.Diagnostics {
			var path string
			switch x := n.(type) {
			case *hclsyntax.ScopeTraversalExpr, *hclsyntax.RelativeTraversalExpr:
				p, ok := refPath(x.(hclsyntax.Expression))
				if !ok {
					return nil
				}
				path = p
			default:
				return nil
			}
			if seen[path] {
				return nil
			}
			seen[path] = true
			out = append(out, path)
			if rest, ok := strings.CutPrefix(path, "local."); ok {
				name := rest
				if i := strings.IndexAny(rest, ".["); i >= 0 {
					name = rest[:i]
				}
				if l, ok := m.locals[name]; ok && !seen["local."+name+"#"] {
					seen["local."+name+"#"] = true
					walk(l)
				}
			}
			return nil
		})
	}
	walk(e)
	sort.Strings(out)
	return out
}

// local resolves "local.NAME" and "local.NAME.KEY" (a key of an object local).
func (m *Module) local(path string) (hclsyntax.Expression, bool) {
	rest, ok := strings.CutPrefix(path, "local.")
	if !ok {
		return nil, false
	}
	name, key, hasKey := strings.Cut(rest, ".")
	l, ok := m.locals[name]
	if !ok {
		return nil, false
	}
	if !hasKey {
		return l, true
	}
	obj, ok := l.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil, false
	}
	for _, item := range obj.Items {
		if k, ok := refPath(item.KeyExpr); ok && k == key {
			return item.ValueExpr, true
		}
		if v, diags := item.KeyExpr.Value(nil); !diags.HasErrors() && v.Type() == cty.String && v.AsString() == key {
			return item.ValueExpr, true
		}
	}
	return nil, false
}

// refPath renders a chain of references and indexes as one path:
// google_cloudfunctions2_function.fn[each.key].service_config[0].service.
func refPath(e hclsyntax.Expression) (string, bool) {
	switch x := e.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		return traversal(x.Traversal), true
	case *hclsyntax.ObjectConsKeyExpr:
		return refPath(x.Wrapped)
	case *hclsyntax.RelativeTraversalExpr:
		src, ok := refPath(x.Source)
		return src + traversal(x.Traversal), ok
	case *hclsyntax.IndexExpr:
		coll, ok := refPath(x.Collection)
		if !ok {
			return "", false
		}
		if k, ok := refPath(x.Key); ok {
			return coll + "[" + k + "]", true
		}
		if v, diags := x.Key.Value(nil); !diags.HasErrors() {
			return coll + "[" + keyText(v) + "]", true
		}
		return "", false
	}
	return "", false
}

func traversal(t hcl.Traversal) string {
	var sb strings.Builder
	for _, s := range t {
		switch x := s.(type) {
		case hcl.TraverseRoot:
			sb.WriteString(x.Name)
		case hcl.TraverseAttr:
			sb.WriteString("." + x.Name)
		case hcl.TraverseIndex:
			sb.WriteString("[" + keyText(x.Key) + "]")
		}
	}
	return sb.String()
}

func keyText(v cty.Value) string {
	switch v.Type() {
	case cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case cty.Number:
		return v.AsBigFloat().Text('f', -1)
	}
	return v.GoString()
}

// Eval evaluates an expression with the module's variables set to vars (name → value) and
// its locals available, for the literal-enough parts of the module (maps of strings, role
// lists). It fails on references to resources.
func (m *Module) Eval(e hclsyntax.Expression, vars map[string]cty.Value) (cty.Value, error) {
	return m.EvalWith(e, vars, nil)
}

// EvalWith is Eval with more top-level names, such as each = {key = ...}.
func (m *Module) EvalWith(e hclsyntax.Expression, vars, extra map[string]cty.Value) (cty.Value, error) {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)},
		Functions: map[string]function.Function{
			"concat": stdlib.ConcatFunc, "toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), "contains": stdlib.ContainsFunc,
			"split": stdlib.SplitFunc, "join": stdlib.JoinFunc, "replace": stdlib.ReplaceFunc,
			"distinct": stdlib.DistinctFunc, "tostring": stdlib.MakeToFunc(cty.String),
			"sort": stdlib.SortFunc, "keys": stdlib.KeysFunc,
		},
	}
	for k, v := range extra {
		ctx.Variables[k] = v
	}
	// Locals may use locals: evaluate until no more of them can be.
	locals := map[string]cty.Value{}
	for progress := true; progress; {
		progress = false
		ctx.Variables["local"] = cty.ObjectVal(locals)
		for name, l := range m.locals {
			if _, done := locals[name]; done {
				continue
			}
			if v, diags := l.Value(ctx); !diags.HasErrors() {
				locals[name] = v
				progress = true
			}
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	v, diags := e.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("evaluate %s: %s", e.Range(), diags.Error())
	}
	return v, nil
}

// Local returns a local's expression.
func (m *Module) Local(name string) (hclsyntax.Expression, bool) {
	l, ok := m.locals[name]
	return l, ok
}
