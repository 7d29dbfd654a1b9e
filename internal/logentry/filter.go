package logentry

import (
	"fmt"
	"slices"
	"strings"
)

// Filter is a sink filter declared as data: the entries of one log, of one resource type, each
// of whose clauses holds.
type Filter struct {
	LogID        string   // the log, as log_id() names it
	ResourceType string   // resource.type
	Clauses      []Clause // each must hold
}

// Clause holds when the field at Path is one of Values.
type Clause struct {
	Path   string
	Values []string
}

// String is the filter in the Logging query language, as a sink takes it. log_id() matches the
// log in a project, folder or organization alike.
func (f Filter) String() string {
	parts := []string{fmt.Sprintf("log_id(%s)", quote(f.LogID)), "resource.type=" + quote(f.ResourceType)}
	for _, c := range f.Clauses {
		var alts []string
		for _, v := range c.Values {
			alts = append(alts, c.Path+"="+quote(v))
		}
		if len(alts) == 1 {
			parts = append(parts, alts[0])
			continue
		}
		parts = append(parts, "("+strings.Join(alts, " OR ")+")")
	}
	return strings.Join(parts, " AND ")
}

// Match says whether the sink would have let e through.
func (f Filter) Match(e Entry) bool {
	if e.LogID() != f.LogID || e.Get("resource.type") != f.ResourceType {
		return false
	}
	for _, c := range f.Clauses {
		if !slices.Contains(c.Values, e.Get(c.Path)) {
			return false
		}
	}
	return true
}

func quote(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }
