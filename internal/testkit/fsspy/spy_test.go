package fsspy_test

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"

	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// What is billed as reads: each document returned by a get or a query, a get of a missing
// document, and one for an empty query and for an aggregation.
func TestBilledReadsCountWhatFirestoreBills(t *testing.T) {
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	ctx := context.Background()
	c := fs.Collection("things")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Doc(id).Set(ctx, map[string]any{"n": 1}); err != nil {
			t.Fatal(err)
		}
	}
	spy.Reset()
	steps := []struct {
		name string
		do   func() error
		want int
	}{
		{"a get", func() error { _, err := c.Doc("a").Get(ctx); return err }, 1},
		{"a get of a missing document", func() error { _, _ = c.Doc("none").Get(ctx); return nil }, 1},
		{"a query of three", func() error { _, err := c.Where("n", "==", 1).Documents(ctx).GetAll(); return err }, 3},
		{"an empty query", func() error { _, err := c.Where("n", "==", 2).Documents(ctx).GetAll(); return err }, 1},
		{"a count", func() error { _, err := c.NewAggregationQuery().WithCount("n").Get(ctx); return err }, 1},
	}
	total := 0
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		total += s.want
		if got := spy.BilledReads(); got != total {
			t.Fatalf("after %s: %d billed reads, want %d", s.name, got, total)
		}
	}
}

// A read-write transaction and a read-only one are told apart; the read-only one's empty
// Commit writes nothing.
func TestTransactionsAreCountedByMode(t *testing.T) {
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	ctx := context.Background()
	doc := fs.Collection("things").Doc("a")
	if err := fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		return tx.Set(doc, map[string]any{"n": 1})
	}); err != nil {
		t.Fatal(err)
	}
	if rw, ro := spy.Transactions(); rw != 1 || ro != 0 || len(spy.Writes()) != 1 {
		t.Fatalf("after a read-write transaction: %d read-write, %d read-only, %d writes; want 1, 0, 1", rw, ro, len(spy.Writes()))
	}
	spy.Reset()
	if err := fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		_, err := tx.Get(doc)
		return err
	}, firestore.ReadOnly); err != nil {
		t.Fatal(err)
	}
	if rw, ro := spy.Transactions(); rw != 0 || ro != 1 || len(spy.Writes()) != 0 {
		t.Fatalf("after a read-only transaction: %d read-write, %d read-only, %d writes; want 0, 1, 0", rw, ro, len(spy.Writes()))
	}
}

// A commit the server applied but whose answer the client lost is no committed write; its
// writes are kept apart, so that a test can tell a settlement in such a commit from none.
func TestWritesOfAFailedCommitAreKeptApart(t *testing.T) {
	spy := fsspy.New()
	fault := fsfaulttest.New(codes.DeadlineExceeded)
	fs := testenv.Firestore(t, append(spy.DialOptions(), fault.DialOptions()...)...)
	ctx := context.Background()
	doc := fs.Collection("things").Doc("a")
	if _, err := doc.Set(ctx, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	spy.Reset()
	err := fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		return tx.Update(doc, []firestore.Update{{Path: "settlement", Value: "x"}})
	})
	if err == nil || fault.Faulted() != 1 {
		t.Fatalf("the faulted commit returned %v after %d faults; want an error after 1", err, fault.Faulted())
	}
	if got := spy.WritesTouching("settlement"); len(got) != 0 {
		t.Errorf("committed writes touching settlement: %v, want none", got)
	}
	if got := spy.FailedWritesTouching("settlement"); got[doc.Path] != 1 || len(got) != 1 {
		t.Errorf("failed writes touching settlement: %v, want %s once", got, doc.Path)
	}
	snap, err := doc.Get(ctx)
	if err != nil || snap.Data()["settlement"] != "x" {
		t.Errorf("the server did not apply the faulted commit: %v %v", snap.Data(), err)
	}
}
