package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// Declaration is one workflow type as the rest of stalesweep sees it.
type Declaration struct {
	Type  contract.WorkflowType
	Scope Scope
	// FromRequest says whether a request on the wire (the HTTP face) may start it.
	FromRequest bool
	// AgeBased says it settles rows on their age alone, so the storm guard judges its runs.
	AgeBased bool
}

// Scope is what one run of a workflow covers.
type Scope struct {
	Kind contract.ScopeKind
	// Fields are the input fields naming the scope, in order; none for the fleet.
	Fields []ScopeField
}

// ScopeField is one input field naming a scope, with a value its schema accepts: Dispatch
// validates a tick's defaults with it in place of the scopes it will fill in.
type ScopeField struct {
	Name    string
	Example string
}

// The scopes of the seeded workflows.
var (
	ScopeOrganization = Scope{Kind: contract.ScopeOrganization, Fields: []ScopeField{orgField}}
	ScopeRunnerGroup  = Scope{Kind: contract.ScopeRunnerGroup, Fields: []ScopeField{orgField, {Name: "runner_group_uuid", Example: exampleUUID}}}
	ScopeQueue        = Scope{Kind: contract.ScopeQueue, Fields: []ScopeField{{Name: "queue", Example: "default"}}}
	ScopeFleet        = Scope{Kind: contract.ScopeFleet}
)

const exampleUUID = "00000000-0000-4000-8000-000000000000"

var orgField = ScopeField{Name: "organization_uuid", Example: exampleUUID}

// Names are the scope's field names, in order.
func (s Scope) Names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

// Values are the scope a validated input covers: its scope fields' values, in order.
func (s Scope) Values(input json.RawMessage) ScopeValues {
	var m map[string]any
	_ = json.Unmarshal(input, &m)
	out := make(ScopeValues, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = fmt.Sprint(m[f.Name])
	}
	return out
}

// Key names the scope a validated input covers (ScopeValues.Key).
func (s Scope) Key(input json.RawMessage) string { return s.Values(input).Key() }

// ScopeValues name one scope: its workflow's scope field values, in order; none for the fleet.
type ScopeValues []string

// Key is the one form a scope is named in: the values joined by "/", or "fleet".
func (v ScopeValues) Key() string {
	if len(v) == 0 {
		return "fleet"
	}
	return strings.Join(v, "/")
}

// Organization returns the organization a validated input is scoped to, if any.
func (s Scope) Organization(input json.RawMessage) (string, bool) {
	if !slices.Contains(s.Names(), orgField.Name) {
		return "", false
	}
	var in struct {
		OrganizationUUID string `json:"organization_uuid"`
	}
	if err := json.Unmarshal(input, &in); err != nil || in.OrganizationUUID == "" {
		return "", false
	}
	return in.OrganizationUUID, true
}

// Declarations is a set of declared workflows, by type.
type Declarations map[contract.WorkflowType]Declaration

// Declared returns the set of ds.
func Declared(ds ...Declaration) Declarations {
	out := Declarations{}
	for _, d := range ds {
		out[d.Type] = d
	}
	return out
}

// Types lists the declared types, sorted.
func (ds Declarations) Types() []contract.WorkflowType {
	out := make([]contract.WorkflowType, 0, len(ds))
	for t := range ds {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// ProbeEach makes a Definition.Probe of a probe of one scope: it asks for each input in turn.
func ProbeEach(one func(ctx context.Context, input json.RawMessage, now time.Time) (bool, error)) func(context.Context, []json.RawMessage, time.Time) ([]bool, error) {
	return func(ctx context.Context, inputs []json.RawMessage, now time.Time) ([]bool, error) {
		out := make([]bool, len(inputs))
		for i, in := range inputs {
			var err error
			if out[i], err = one(ctx, in, now); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}
