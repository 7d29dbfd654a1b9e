// Package fsspy watches a Firestore client's gRPC traffic: which documents it read, which it
// wrote (and which fields), and which queries it ran. Tests use it to count settlement writes,
// to prove a run never touched another tenant's documents, and to hold every query to a declared
// index; the benchmarks use it to count reads and writes per row.
//
// It is a pair of client interceptors, so it sees exactly what went over the wire, against the
// emulator or production alike.
package fsspy

import (
	"context"
	"io"
	"strings"
	"sync"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
)

// Write is one document write in a committed request.
type Write struct {
	Document string   // full resource name
	Fields   []string // update mask field paths; empty for a whole-document set or delete
	Delete   bool
}

// Spy records Firestore traffic. The zero value is not usable; use New.
type Spy struct {
	mu     sync.Mutex
	reads  []string
	writes []Write
	// failed are the writes of commits that returned an error: a deadline or a lost answer may
	// fall after the server applied them (firestoreconn.Ambiguous).
	failed  []Write
	queries []*firestorepb.StructuredQuery
	commits int
	billed  int
	// readWrite and readOnly count the transactions begun, by mode.
	readWrite, readOnly int
}

// New returns an empty spy.
func New() *Spy { return &Spy{} }

// DialOptions returns the interceptors to dial Firestore with (firestoreconn.Options.DialOptions).
func (s *Spy) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(s.unary),
		grpc.WithChainStreamInterceptor(s.stream),
	}
}

func (s *Spy) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		if c, ok := req.(*firestorepb.CommitRequest); ok {
			s.mu.Lock()
			for _, w := range c.GetWrites() {
				s.failed = append(s.failed, writeOf(w))
			}
			s.mu.Unlock()
		}
		return err
	}
	if b, ok := req.(*firestorepb.BeginTransactionRequest); ok {
		s.mu.Lock()
		if b.GetOptions().GetReadOnly() != nil {
			s.readOnly++
		} else {
			s.readWrite++ // no options, or read-write ones (a retry)
		}
		s.mu.Unlock()
	}
	if c, ok := req.(*firestorepb.CommitRequest); ok {
		s.mu.Lock()
		s.commits++
		for _, w := range c.GetWrites() {
			s.writes = append(s.writes, writeOf(w))
		}
		s.mu.Unlock()
	}
	return nil
}

func writeOf(w *firestorepb.Write) Write {
	if d := w.GetDelete(); d != "" {
		return Write{Document: d, Delete: true}
	}
	out := Write{Document: w.GetUpdate().GetName()}
	if m := w.GetUpdateMask(); m != nil {
		out.Fields = append(out.Fields, m.GetFieldPaths()...)
	}
	return out
}

func (s *Spy) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &watched{ClientStream: cs, spy: s}, nil
}

type watched struct {
	grpc.ClientStream
	spy   *Spy
	query bool // a query or an aggregation: billed one read at least
	docs  int
}

func (w *watched) SendMsg(m any) error {
	var q *firestorepb.StructuredQuery
	switch r := m.(type) {
	case *firestorepb.RunQueryRequest:
		q = r.GetStructuredQuery()
	case *firestorepb.RunAggregationQueryRequest: // counts: the query under the aggregation
		q = r.GetStructuredAggregationQuery().GetStructuredQuery()
	}
	if q != nil {
		w.query = true
		w.spy.mu.Lock()
		w.spy.queries = append(w.spy.queries, q)
		w.spy.mu.Unlock()
	}
	return w.ClientStream.SendMsg(m)
}

func (w *watched) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	if err != nil {
		if err == io.EOF && w.query && w.docs == 0 {
			w.spy.mu.Lock()
			w.spy.billed++ // an empty query, or an aggregation: one read
			w.spy.mu.Unlock()
		}
		return err
	}
	var name string
	billed := 0
	switch r := m.(type) {
	case *firestorepb.BatchGetDocumentsResponse:
		name = r.GetFound().GetName()
		if name != "" || r.GetMissing() != "" {
			billed = 1 // a missing document is billed too
		}
	case *firestorepb.RunQueryResponse:
		if name = r.GetDocument().GetName(); name != "" {
			billed = 1
			w.docs++ // a stream's messages are received one at a time
		}
	}
	if billed > 0 {
		w.spy.mu.Lock()
		if name != "" {
			w.spy.reads = append(w.spy.reads, name)
		}
		w.spy.billed += billed
		w.spy.mu.Unlock()
	}
	return nil
}

// Reads returns the names of every document read, queries included, in order.
func (s *Spy) Reads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reads...)
}

// Writes returns every committed write, in order.
func (s *Spy) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write(nil), s.writes...)
}

// Queries returns every structured query run, in order, the ones under count aggregations
// included.
func (s *Spy) Queries() []*firestorepb.StructuredQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*firestorepb.StructuredQuery(nil), s.queries...)
}

// BilledReads is what Firestore bills as document reads for the traffic seen: each document a
// get or a query returned, each get of a missing document, and one for a query that returned
// nothing or an aggregation (billed one read per up to 1,000 index entries; counted one).
func (s *Spy) BilledReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billed
}

// Commits returns how many commits succeeded.
func (s *Spy) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// Transactions returns how many transactions were begun, read-write and read-only. A read-only
// one cannot write, but its end is a Commit without writes, which Commits counts.
func (s *Spy) Transactions() (readWrite, readOnly int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readWrite, s.readOnly
}

// Reset forgets everything recorded.
func (s *Spy) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads, s.writes, s.failed, s.queries, s.commits, s.billed = nil, nil, nil, nil, 0, 0
	s.readWrite, s.readOnly = 0, 0
}

// WritesTouching counts the committed writes whose update mask includes field (or a path under
// it).
func (s *Spy) WritesTouching(field string) map[string]int { return touching(s.Writes(), field) }

// FailedWritesTouching counts, as WritesTouching does, the writes of commits that returned an
// error, each of which may or may not have been applied.
func (s *Spy) FailedWritesTouching(field string) map[string]int {
	s.mu.Lock()
	failed := append([]Write(nil), s.failed...)
	s.mu.Unlock()
	return touching(failed, field)
}

func touching(writes []Write, field string) map[string]int {
	out := map[string]int{}
	for _, w := range writes {
		for _, f := range w.Fields {
			if f == field || strings.HasPrefix(f, field+".") {
				out[w.Document]++
				break
			}
		}
	}
	return out
}

// DocID returns the last segment of a document resource name.
func DocID(name string) string {
	return name[strings.LastIndexByte(name, '/')+1:]
}

// QueryShape is what a query needs of an index: its collection, its equality (and `in`) fields, and the
// field it orders or ranges on.
type QueryShape struct {
	Collection string
	Equality   []string
	OrderBy    string
}

// Shape extracts a structured query's shape.
func Shape(q *firestorepb.StructuredQuery) QueryShape {
	var sh QueryShape
	if from := q.GetFrom(); len(from) > 0 {
		sh.Collection = from[0].GetCollectionId()
	}
	var walk func(f *firestorepb.StructuredQuery_Filter)
	walk = func(f *firestorepb.StructuredQuery_Filter) {
		switch {
		case f.GetCompositeFilter() != nil:
			for _, sub := range f.GetCompositeFilter().GetFilters() {
				walk(sub)
			}
		case f.GetFieldFilter() != nil:
			ff := f.GetFieldFilter()
			// An `in` filter is a disjunction of equalities, served by the same index prefix.
			if op := ff.GetOp(); op == firestorepb.StructuredQuery_FieldFilter_EQUAL || op == firestorepb.StructuredQuery_FieldFilter_IN {
				sh.Equality = append(sh.Equality, ff.GetField().GetFieldPath())
			} else if sh.OrderBy == "" {
				sh.OrderBy = ff.GetField().GetFieldPath()
			}
		}
	}
	if q.GetWhere() != nil {
		walk(q.GetWhere())
	}
	for _, o := range q.GetOrderBy() {
		if p := o.GetField().GetFieldPath(); p != "__name__" {
			sh.OrderBy = p
			break
		}
	}
	return sh
}
