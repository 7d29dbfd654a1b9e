package rosterstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// readRoster pages through roster r from the start.
func readRoster(t *testing.T, s *rosterstore.Store, r rosterstore.Roster) ([]string, int, error) {
	t.Helper()
	var ids []string
	pages := 0
	for after := ""; ; pages++ {
		page, next, err := s.Page(context.Background(), r, after)
		if err != nil {
			return ids, pages, err
		}
		ids = append(ids, page...)
		if next == "" {
			return ids, pages + 1, nil
		}
		if pages > 100 {
			t.Fatal("the roster's pages do not end")
		}
		after = next
	}
}

// A roster written in parts, each split into shards no larger than a document holds, reads back
// whole and in order, a shard a page; written again, it is the same documents.
func TestARosterReadsBackWhatWasWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	s := rosterstore.New(fs, ledger.Retention{}, nil)
	if _, ok, err := s.Current(ctx); ok || err != nil {
		t.Fatalf("a new project has a roster: %v %v", ok, err)
	}
	// Ids as long as a document id may be, so that one invocation's share takes several shards.
	long := strings.Repeat("x", 1400)
	var ids []string
	for i := range 1500 {
		ids = append(ids, fmt.Sprintf("org-%04d-%s", i, long))
	}
	// Two invocations of one tick: the first listed up to ids[899], the second the rest.
	for range 2 { // the second time, as a redelivered continuation would
		if err := s.PutShards(ctx, "tick-1", "", ids[:900]); err != nil {
			t.Fatal(err)
		}
		if err := s.PutShards(ctx, "tick-1", ids[899], ids[900:]); err != nil {
			t.Fatal(err)
		}
	}
	built := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := rosterstore.Roster{Version: "tick-1", BuiltAt: built, Last: ids[len(ids)-1]}
	if made, err := s.Finish(ctx, r); !made || err != nil {
		t.Fatalf("finish = %v, %v", made, err)
	}
	got, ok, err := s.Current(ctx)
	if !ok || err != nil || got.Version != "tick-1" || !got.BuiltAt.Equal(built) || got.Last != r.Last {
		t.Fatalf("current = %+v %v %v", got, ok, err)
	}
	read, pages, err := readRoster(t, s, got)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(read, ids) {
		t.Fatalf("read %d ids back, want the %d written in order", len(read), len(ids))
	}
	// 1,416 bytes an id in 800 KiB: 578 a shard; 900 and 600 ids make 2 and 2 shards.
	if pages != 4 {
		t.Errorf("%d pages, want 4 (a shard a page)", pages)
	}
	snaps, err := fs.Collection(ledger.RosterCollection).Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 5 {
		t.Errorf("%d roster documents, want 4 shards and the current one (the second writing wrote the same)", len(snaps))
	}
	// Resuming mid-shard starts after the id asked.
	page, _, err := s.Page(ctx, got, ids[10])
	if err != nil || len(page) == 0 || page[0] != ids[11] {
		t.Errorf("a page after %q starts at %.12q, %v", ids[10][:8], page, err)
	}
	if page, next, err := s.Page(ctx, got, got.Last); len(page) != 0 || next != "" || err != nil {
		t.Errorf("a page after the last id = %d ids, %q, %v; want the end", len(page), next, err)
	}
	// A shard gone from the middle (a replaced roster, deleted part way) is a gap, not an end.
	_, second, err := s.Page(ctx, got, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		if v, _ := snap.DataAt("after"); v == second {
			if _, err := snap.Ref.Delete(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := readRoster(t, s, got); !errors.Is(err, rosterstore.ErrRosterGone) {
		t.Errorf("reading a roster with a shard gone: %v, want ErrRosterGone", err)
	}
}

// Of two rosters built at once, the one finished later stands, whatever order they finish in;
// the roster replaced loses its shards, and a tick still reading it learns it is gone. Shards of
// a roster never finished go a day later.
func TestTheLaterRosterStandsAndTheReplacedOneGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	s := rosterstore.New(fs, ledger.Retention{}, nil)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	put := func(version string, ids ...string) rosterstore.Roster {
		if err := s.PutShards(ctx, version, "", ids); err != nil {
			t.Fatal(err)
		}
		return rosterstore.Roster{Version: version, Last: ids[len(ids)-1]}
	}
	older, newer := put("t1", "a", "b"), put("t2", "a", "b", "c")
	older.BuiltAt, newer.BuiltAt = at, at.Add(time.Minute)
	put("lost", "a") // a tick that never finished its roster

	if made, err := s.Finish(ctx, newer); !made || err != nil {
		t.Fatalf("finish the newer = %v, %v", made, err)
	}
	if made, err := s.Finish(ctx, older); made || err != nil {
		t.Fatalf("finish the older after the newer = %v, %v; want it refused", made, err)
	}
	if cur, _, _ := s.Current(ctx); cur.Version != "t2" {
		t.Fatalf("current is %s, want t2", cur.Version)
	}
	ids, _, err := readRoster(t, s, newer)
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("the roster in use reads %v, %v", ids, err)
	}

	// A third replaces t2: t2's shards go, and reading it says so.
	third := put("t3", "a", "c")
	third.BuiltAt = at.Add(2 * time.Minute)
	if made, err := s.Finish(ctx, third); !made || err != nil {
		t.Fatalf("finish the third = %v, %v", made, err)
	}
	if _, _, err := s.Page(ctx, newer, ""); !errors.Is(err, rosterstore.ErrRosterGone) {
		t.Errorf("reading the replaced roster: %v, want ErrRosterGone", err)
	}
	shardsOf := func(version string) int {
		snaps, err := fs.Collection(ledger.RosterCollection).Where("shard_of", "==", version).Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		return len(snaps)
	}
	if n := shardsOf("lost"); n != 1 {
		t.Errorf("the unfinished roster's shard is gone within a day (%d left)", n)
	}
	// A day later, the next finish deletes the unfinished roster's shard, and t1's: never in use.
	fourth := put("t4", "b")
	fourth.BuiltAt = time.Now().Add(rosterstore.RosterOrphanAge + time.Hour)
	if made, err := s.Finish(ctx, fourth); !made || err != nil {
		t.Fatalf("finish the fourth = %v, %v", made, err)
	}
	for _, v := range []string{"t1", "t2", "t3", "lost"} {
		if n := shardsOf(v); n != 0 {
			t.Errorf("%d shards of %s are left, want none", n, v)
		}
	}
	if n := shardsOf("t4"); n != 1 {
		t.Errorf("the roster in use has %d shards, want 1", n)
	}
}
