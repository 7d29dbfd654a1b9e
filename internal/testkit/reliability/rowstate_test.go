package reliability_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
)

// A row is judged as a unit: the documents one settling transaction writes together (a row and
// its interlock; a task and its chain entries). Its state is flat: "doc/path#field.path" →
// value, with no key at all for a document that does not exist, so a deleted interlock or a new
// chain entry shows up as keys gone or keys added.

// unit names the documents of one row: documents by path — the ones that exist and the ones
// its change would create — and subcollections every document of which belongs to the row,
// listed when a read asks for everything (a listing costs a query each, so a trial lists them
// once, at its end, to catch a document no id predicted).
type unit struct {
	docs []string            // paths relative to the database's documents root
	subs map[string][]string // document path → its subcollections
}

// state is a unit as read, flattened.
type state map[string]any

// matcher checks one value; it returns "" when the value is acceptable.
type matcher func(v any) string

// change is one complete write a transaction makes to a unit, as seen from the unit's state
// before it: the keys it sets (to a value or to anything a matcher accepts), the keys or whole
// documents ("doc#") it deletes, and prefixes under which it writes what an executor said,
// checked as a whole by a function.
type change struct {
	set  map[string]any
	drop []string
	free map[string]func(sub map[string]any) string
}

// docs lists the documents the change writes: with the ones that exist, the documents a read of
// the unit must look at.
func (c *change) docs() []string {
	seen := map[string]bool{}
	var out []string
	for k := range c.set {
		doc, _, _ := strings.Cut(k, "#")
		if !seen[doc] {
			seen[doc] = true
			out = append(out, doc)
		}
	}
	slices.Sort(out)
	return out
}

// The verdicts on a unit.
const (
	untouched = "untouched"
	changed   = "changed"
	torn      = "torn"
)

// judge says what became of a unit that was before and is after: untouched, changed (exactly ch
// applied to before), or torn, with every difference from ch. A nil ch means no change is legal.
func judge(before, after state, ch *change) (string, []string) {
	if len(compare(before, after, nil)) == 0 {
		return untouched, nil
	}
	if ch == nil {
		return torn, prefixed("no change is legal, yet it changed:", compare(before, after, nil))
	}
	if diffs := compare(ch.apply(before), after, ch.free); len(diffs) > 0 {
		return torn, prefixed("neither untouched nor the complete change:", diffs)
	}
	return changed, nil
}

// apply returns before with the change made.
func (c *change) apply(before state) state {
	out := maps.Clone(before)
	for _, d := range c.drop {
		for k := range out {
			if k == d || strings.HasPrefix(k, d+".") || (strings.HasSuffix(d, "#") && strings.HasPrefix(k, d)) {
				delete(out, k)
			}
		}
	}
	for k, v := range c.set {
		if i, ok := v.(int); ok {
			v = int64(i)
		}
		// A leaf replaces whatever map sat at its path, and a map's leaves replace the map.
		for old := range out {
			if strings.HasPrefix(old, k+".") || strings.HasPrefix(k, old+".") {
				delete(out, old)
			}
		}
		out[k] = v
	}
	return out
}

// compare lists how got differs from want. Keys of got under a free prefix that want does not
// name are handed, together, to that prefix's check.
func compare(want, got state, free map[string]func(map[string]any) string) []string {
	var diffs []string
	under := map[string]map[string]any{}
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case inWant && inGot:
			if m, ok := w.(matcher); ok {
				if msg := m(g); msg != "" {
					diffs = append(diffs, fmt.Sprintf("%s = %v: %s", k, g, msg))
				}
			} else if !same(w, g) {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", k, g, w))
			}
		case inWant:
			diffs = append(diffs, fmt.Sprintf("%s is missing, want %v", k, display(w)))
		default:
			if p, ok := freePrefix(free, k); ok {
				if under[p] == nil {
					under[p] = map[string]any{}
				}
				under[p][strings.TrimPrefix(k, p)] = g
				continue
			}
			diffs = append(diffs, fmt.Sprintf("%s = %v is not expected", k, g))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(free)) {
		if msg := free[p](under[p]); msg != "" {
			diffs = append(diffs, fmt.Sprintf("under %s: %s", p, msg))
		}
	}
	return diffs
}

func freePrefix(free map[string]func(map[string]any) string, k string) (string, bool) {
	for p := range free {
		if strings.HasPrefix(k, p) {
			return p, true
		}
	}
	return "", false
}

func display(v any) any {
	if _, ok := v.(matcher); ok {
		return "a value the check accepts"
	}
	return v
}

// prefixed heads a list of differences with what they add up to.
func prefixed(p string, diffs []string) []string {
	return append([]string{p}, diffs...)
}

// same compares Firestore values: times by instant, maps and arrays element by element.
func same(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// flatten adds a document's fields to s under doc.
func flatten(s state, doc string, data map[string]any) {
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+".", sub)
				continue
			}
			s[prefix+k] = v
		}
	}
	walk(doc+"#", data)
}

// readUnits reads units: their documents in one batch, then, with list, each subcollection.
func readUnits(ctx context.Context, fs *firestore.Client, units []unit, list bool) ([]state, error) {
	var refs []*firestore.DocumentRef
	for _, u := range units {
		for _, d := range u.docs {
			refs = append(refs, fs.Doc(d))
		}
	}
	snaps, err := fs.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read rows: %w", err)
	}
	out := make([]state, len(units))
	i := 0
	for n, u := range units {
		out[n] = state{}
		for _, d := range u.docs {
			if snaps[i].Exists() {
				flatten(out[n], d, snaps[i].Data())
			}
			i++
		}
		if !list {
			continue
		}
		for doc, subs := range u.subs {
			for _, sub := range subs {
				all, err := fs.Doc(doc).Collection(sub).Documents(ctx).GetAll()
				if err != nil {
					return nil, fmt.Errorf("read %s/%s: %w", doc, sub, err)
				}
				for _, snap := range all {
					flatten(out[n], doc+"/"+sub+"/"+snap.Ref.ID, snap.Data())
				}
			}
		}
	}
	return out, nil
}

// Matchers.

func nonEmptyString(v any) string {
	if s, ok := v.(string); !ok || s == "" {
		return "want a non-empty string"
	}
	return ""
}

// evidenceWith checks an executor's evidence: present, with the keys it must carry.
func evidenceWith(keys ...string) func(map[string]any) string {
	return func(sub map[string]any) string {
		if len(sub) == 0 {
			return "the executor's evidence is missing"
		}
		for _, k := range keys {
			found := false
			for have := range sub {
				if have == k || strings.HasPrefix(have, k+".") {
					found = true
				}
			}
			if !found {
				return fmt.Sprintf("the executor's evidence has no %s", k)
			}
		}
		return ""
	}
}
