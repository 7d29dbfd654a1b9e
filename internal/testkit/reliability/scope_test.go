package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// What the isolation checks are made of: a dump of every document in the project, a log of the
// queries a connection runs with the parent each runs under (fsspy records the query, not where
// it runs), and three checks that return what they found wrong — so that each can also be shown
// to report a doctored input.

// docs is a dump: path → data.
type docs map[string]map[string]any

// dump reads every document of the project, subcollections included (outside the window in
// which the spy records a run).
func dump(ctx context.Context, fs *firestore.Client) (docs, error) {
	out := docs{}
	var walk func(it *firestore.CollectionIterator) error
	walk = func(it *firestore.CollectionIterator) error {
		for {
			coll, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return nil
			}
			if err != nil {
				return err
			}
			refs, err := coll.DocumentRefs(ctx).GetAll() // missing parents of subcollections too
			if err != nil {
				return err
			}
			snaps, err := fs.GetAll(ctx, refs)
			if err != nil {
				return err
			}
			for i, snap := range snaps {
				if snap.Exists() {
					out[relPath(refs[i].Path)] = snap.Data()
				}
				if err := walk(refs[i].Collections(ctx)); err != nil {
					return err
				}
			}
		}
	}
	if err := walk(fs.Collections(ctx)); err != nil {
		return nil, fmt.Errorf("dump the project: %w", err)
	}
	return out, nil
}

// loggedQuery is one query as sent: where it runs and what it asks.
type loggedQuery struct {
	parent string // relative to the documents root: "" for the root, "task_queues/q" for a queue
	query  *firestorepb.StructuredQuery
}

// queryLog records the queries a connection runs, count aggregations included.
type queryLog struct {
	mu sync.Mutex
	qs []loggedQuery
}

func (l *queryLog) dialOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &loggedStream{ClientStream: cs, log: l}, nil
	})
}

type loggedStream struct {
	grpc.ClientStream
	log *queryLog
}

func (s *loggedStream) SendMsg(m any) error {
	var q loggedQuery
	switch r := m.(type) {
	case *firestorepb.RunQueryRequest:
		q = loggedQuery{parent: r.GetParent(), query: r.GetStructuredQuery()}
	case *firestorepb.RunAggregationQueryRequest:
		q = loggedQuery{parent: r.GetParent(), query: r.GetStructuredAggregationQuery().GetStructuredQuery()}
	}
	if q.query != nil {
		_, q.parent, _ = strings.Cut(q.parent+"/", "/documents/")
		q.parent = strings.TrimSuffix(q.parent, "/")
		s.log.mu.Lock()
		s.log.qs = append(s.log.qs, q)
		s.log.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

func (l *queryLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qs = nil
}

func (l *queryLog) all() []loggedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.qs)
}

// equalities returns a query's equality filters: field path → value as sent.
func equalities(q *firestorepb.StructuredQuery) map[string]*firestorepb.Value {
	out := map[string]*firestorepb.Value{}
	var walk func(f *firestorepb.StructuredQuery_Filter)
	walk = func(f *firestorepb.StructuredQuery_Filter) {
		if c := f.GetCompositeFilter(); c != nil {
			if c.GetOp() != firestorepb.StructuredQuery_CompositeFilter_AND {
				return // a disjunction scopes nothing
			}
			for _, sub := range c.GetFilters() {
				walk(sub)
			}
			return
		}
		if ff := f.GetFieldFilter(); ff != nil && ff.GetOp() == firestorepb.StructuredQuery_FieldFilter_EQUAL {
			out[ff.GetField().GetFieldPath()] = ff.GetValue()
		}
	}
	if q.GetWhere() != nil {
		walk(q.GetWhere())
	}
	return out
}

// scopedBy says what is wrong with a query that must run on collection under parent with an
// equality filter field == value for each of fields (fsspy.Shape names them; the value is checked
// too).
func scopedBy(lq loggedQuery, parent, collection string, fields map[string]string) string {
	sh := fsspy.Shape(lq.query)
	from := lq.query.GetFrom()
	switch {
	case lq.parent != parent:
		return fmt.Sprintf("query on %s runs under %q, want %q", sh.Collection, lq.parent, parent)
	case len(from) != 1 || from[0].GetAllDescendants():
		return fmt.Sprintf("query on %s is a collection-group query or spans collections: %v", sh.Collection, from)
	case sh.Collection != collection:
		return fmt.Sprintf("query on collection %s, want %s", sh.Collection, collection)
	}
	eq := equalities(lq.query)
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(sh.Equality, f) {
			return fmt.Sprintf("query on %s has no equality filter on %s (its equalities: %v)", sh.Collection, f, sh.Equality)
		}
		if got := eq[f].GetStringValue(); got != fields[f] {
			return fmt.Sprintf("query on %s filters %s == %q, want %q", sh.Collection, f, got, fields[f])
		}
	}
	return ""
}

// bookkeeping reports stalesweep's own documents: run records and their receipts, guards, the
// clock document, pauses.
func bookkeeping(path string) bool {
	for _, c := range []string{ledger.RunsCollection, ledger.GuardsCollection, firestoreconn.ClockCollection, ledger.TargetsCollection, pausestore.PausesCollection} {
		if strings.HasPrefix(path, c+"/") {
			return true
		}
	}
	return false
}

// strayDocs lists the documents among paths a run may not touch.
func strayDocs(verb string, paths []string, may func(path string) bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] || may(p) {
			continue
		}
		seen[p] = true
		out = append(out, fmt.Sprintf("%s %s, which is not the run's scope's", verb, p))
	}
	return out
}

// changedOutside lists the documents outside the scope (as outside says) that differ between two
// dumps, appeared or disappeared.
func changedOutside(before, after docs, outside func(path string) bool) []string {
	var out []string
	paths := slices.Sorted(maps.Keys(before))
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range slices.Compact(paths) {
		if !outside(p) {
			continue
		}
		b, inBefore := before[p]
		a, inAfter := after[p]
		switch {
		case !inAfter:
			out = append(out, fmt.Sprintf("%s of another scope was deleted", p))
		case !inBefore:
			out = append(out, fmt.Sprintf("%s appeared in another scope", p))
		case !same(b, a):
			out = append(out, fmt.Sprintf("%s of another scope changed: %v → %v", p, b, a))
		}
	}
	return out
}

// docPaths turns fsspy's full resource names, and its writes, into paths.
func docPaths(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = relPath(n)
	}
	return out
}

func writePaths(ws []fsspy.Write) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = relPath(w.Document)
	}
	return out
}

// collectionOf is the collection a document path is in.
func collectionOf(path string) string {
	parts := strings.Split(path, "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[len(parts)-2]
}
