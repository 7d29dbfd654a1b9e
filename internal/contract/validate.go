package contract

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

var printer = message.NewPrinter(language.English)

var compiled = sync.OnceValues(func() (map[WorkflowType]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := make(map[WorkflowType]*jsonschema.Schema)
	for _, t := range Seeded() {
		raw, err := schemaFiles.ReadFile(SchemaPath(t))
		if err != nil {
			return nil, fmt.Errorf("read schema of %s: %w", t, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("parse schema of %s: %w", t, err)
		}
		url := "mem:///" + string(t) + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("add schema of %s: %w", t, err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("compile schema of %s: %w", t, err)
		}
		out[t] = sch
	}
	return out, nil
})

// SchemaPath is where the input schema of t lives in the embedded schemas.
func SchemaPath(t WorkflowType) string { return "schemas/" + string(t) + ".json" }

// Schema returns the raw input schema of t.
func Schema(t WorkflowType) ([]byte, error) { return schemaFiles.ReadFile(SchemaPath(t)) }

// Validate checks raw (empty or null: {}) against t's input schema, returning it with defaults applied and integers canonical.
func Validate(t WorkflowType, raw []byte) (json.RawMessage, error) {
	schemas, err := compiled()
	if err != nil {
		return nil, err
	}
	sch, ok := schemas[t]
	if !ok { // every seeded type has its schema: one without is no workflow type at all
		return nil, Invalid("workflow_type", "enum", "unknown workflow type %q", t)
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, Invalid("initial_data", "type", "must be one JSON object: %v", err)
	}
	if err := sch.Validate(inst); err != nil {
		ve, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return nil, fmt.Errorf("validate %s input: %w", t, err)
		}
		return nil, &ValidationError{Violations: violations(ve)}
	}
	obj := inst.(map[string]any) // the schema requires an object
	for name, prop := range sch.Properties {
		if _, present := obj[name]; !present && prop.Default != nil {
			obj[name] = *prop.Default
		}
	}
	canonicalize(obj)
	return json.Marshal(obj)
}

// violations flattens a validation error tree into its leaves, one per broken rule.
func violations(root *jsonschema.ValidationError) []Violation {
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		kw := e.ErrorKind.KeywordPath()
		rule := "schema"
		if len(kw) > 0 {
			rule = kw[0]
		}
		field := strings.Join(e.InstanceLocation, ".")
		msg := e.ErrorKind.LocalizedString(printer)
		switch k := e.ErrorKind.(type) {
		case *kind.Minimum:
			msg = bound("minimum", k.Got, k.Want)
		case *kind.Maximum:
			msg = bound("maximum", k.Got, k.Want)
		case *kind.ExclusiveMinimum:
			msg = bound("exclusiveMinimum", k.Got, k.Want)
		case *kind.ExclusiveMaximum:
			msg = bound("exclusiveMaximum", k.Got, k.Want)
		case *kind.Required:
			for _, name := range k.Missing {
				out = append(out, Violation{Field: join(field, name), Rule: rule, Message: "is required"})
			}
			return
		case *kind.AdditionalProperties:
			for _, name := range k.Properties {
				if name == "" { // a violation must name a field: name the object holding it
					out = append(out, Violation{Field: orInput(field), Rule: rule, Message: "has a field with an empty name, which is not a known field"})
					continue
				}
				out = append(out, Violation{Field: join(field, name), Rule: rule, Message: "is not a known field"})
			}
			return
		}
		field = orInput(field)
		out = append(out, Violation{Field: field, Rule: rule, Message: msg})
	}
	walk(root)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return slices.Compact(out)
}

// bound says a range violation with its numbers as an operator typed them: the library's own
// message goes through float64 and prints 31536001 as 3.1536001×10⁰⁷.
func bound(rule string, got, want *big.Rat) string {
	return fmt.Sprintf("%s: got %s, want %s", rule, plainNumber(got), plainNumber(want))
}

// plainNumber renders r as a plain decimal: an integer without exponent, a fraction as float64 prints it.
func plainNumber(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func orInput(field string) string {
	if field == "" {
		return "initial_data"
	}
	return field
}

func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// canonicalize rewrites every integral json.Number (1.0, 1e2) as a plain integer so that the
// workflows' json.Unmarshal into int64 fields accepts what the schema accepted.
func canonicalize(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := e.(json.Number); ok {
				x[k] = canonicalNumber(n)
				continue
			}
			canonicalize(e)
		}
	case []any:
		for i, e := range x {
			if n, ok := e.(json.Number); ok {
				x[i] = canonicalNumber(n)
				continue
			}
			canonicalize(e)
		}
	}
}

func canonicalNumber(n json.Number) json.Number {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() {
		return n
	}
	return json.Number(r.Num().String())
}

// AtLeast refuses a validated input whose integer field is below floor, naming the field and the
// setting behind the floor: a rule beyond the schema, for the paths off the command line.
func AtLeast(input json.RawMessage, field string, floor int64, setting, why string) error {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(input, &in); err != nil {
		return Invalid("initial_data", "type", "must be a JSON object")
	}
	var v int64
	if err := json.Unmarshal(in[field], &v); err != nil {
		return Invalid(field, "type", "must be an integer")
	}
	if v < floor {
		return Invalid(field, "minimum", "must be at least %d off the command line (got %d; %s): %s", floor, v, setting, why)
	}
	return nil
}
