package functions

import (
	"strings"

	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
)

// docWrites is what the functions wrote to the documents one test owns, as the package's spy
// saw it on their Firestore connection, by document path relative to the database
// ("runner_executions/ID", "sweep_runs/RUN/syncs/ROW").
type docWrites struct {
	all     map[string]int // commits that wrote the document (set, update or delete)
	deletes map[string]int
	fields  map[string]map[string]int // document → top-level field → writes touching it
}

// spyMark is a position in the spy's record of writes.
type spyMark int

// markSpy returns the position of the next write the spy will record.
func markSpy() spyMark { return spyMark(len(spy.Writes())) }

// writesUnder collects the spy's writes, from mark on, to documents whose path starts with one
// of prefixes. Prefixes carry unique ids, so other tests' writes never match; the mark keeps
// apart a test's successive uses of a document every run of a workflow shares (the fleet-wide
// sweep's guard).
func writesUnder(mark spyMark, prefixes ...string) docWrites {
	d := docWrites{all: map[string]int{}, deletes: map[string]int{}, fields: map[string]map[string]int{}}
	for _, w := range spy.Writes()[mark:] {
		path := relPath(w.Document)
		if !hasAnyPrefix(path, prefixes) {
			continue
		}
		d.all[path]++
		if w.Delete {
			d.deletes[path]++
		}
		if d.fields[path] == nil {
			d.fields[path] = map[string]int{}
		}
		seen := map[string]bool{}
		for _, f := range w.Fields {
			top, _, _ := strings.Cut(f, ".")
			if !seen[top] {
				seen[top] = true
				d.fields[path][top]++
			}
		}
	}
	return d
}

// touching is how many writes to path touched field (a top-level field, or any path under it).
func (d docWrites) touching(path, field string) int { return d.fields[path][field] }

// relPath strips "projects/P/databases/D/documents/" from a document's resource name.
func relPath(name string) string {
	if _, rest, ok := strings.Cut(name, "/documents/"); ok {
		return rest
	}
	return fsspy.DocID(name)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}
