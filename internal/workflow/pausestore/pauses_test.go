package pausestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestPausePutIsIdempotentAndDeleteReportsWhatItRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	store := pausestore.New(fs)
	p := pausestore.Pause{WorkflowType: "pm.sweep", Scope: "default", PausedBy: "local:op@h", PausedAt: t0, Reason: "incident 12"}
	for range 2 {
		if err := store.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	p.Until, p.Reason = t0.Add(time.Hour), "incident 12, for an hour"
	if err := store.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("three puts of one pause left %d documents: %+v", len(list), list)
	}
	if got := list[0]; got.Reason != p.Reason || !got.Until.Equal(p.Until) || !got.ExpireAt.Equal(p.Until) {
		t.Errorf("stored %+v, want the last put's reason and until, and expire_at = until", got)
	}
	// An indefinite pause has no expire_at: the TTL policy must never delete it.
	p.Until = time.Time{}
	if err := store.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	snap, err := fs.Collection(pausestore.PausesCollection).Doc(pausestore.PauseID("pm.sweep", "default")).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.DataAt("expire_at"); err == nil {
		t.Error("an indefinite pause carries expire_at")
	}
	for i, want := range []bool{true, false} {
		existed, err := store.Delete(ctx, "pm.sweep", "default")
		if err != nil {
			t.Fatal(err)
		}
		if existed != want {
			t.Errorf("delete %d: existed = %t, want %t", i, existed, want)
		}
	}
}

func TestCoveringFindsTheFleetOrTheScopeAboveAndIgnoresEndedPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := pausestore.New(fs)
	const typ = "runner.workspace-lease-settle"
	put := func(scope string, until time.Time) {
		t.Helper()
		if err := store.Put(ctx, pausestore.Pause{WorkflowType: typ, Scope: scope, PausedBy: "op", PausedAt: t0.Add(-time.Hour), Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	put("org1", time.Time{})
	put("org2/g", t0) // ended at t0
	put("org3/g", time.Time{})
	for scope, want := range map[string]string{
		"org1/g": "org1", "org1/h": "org1", "org2/g": "", "org3/g": "org3/g", "org3/h": "", "org4/g": "",
	} {
		p, err := store.Covering(ctx, typ, scope, t0)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && p != nil:
			t.Errorf("%s: paused by %+v, want not paused", scope, p)
		case want != "" && (p == nil || p.Scope != want):
			t.Errorf("%s: paused by %+v, want the pause of %s", scope, p, want)
		}
	}
	if p, _ := store.Covering(ctx, "pm.sweep", "org1", t0); p != nil {
		t.Errorf("another workflow's pause stopped pm.sweep: %+v", p)
	}
	put("", time.Time{})
	if p, _ := store.Covering(ctx, typ, "org9/g", t0); p == nil || !p.Fleet() {
		t.Errorf("a fleet pause does not cover org9/g: %+v", p)
	}
	spy.Reset()
	if _, err := store.List(ctx, typ, 0); err != nil {
		t.Fatal(err)
	}
	for _, q := range spy.Queries() {
		sh := fsspy.Shape(q)
		if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
			t.Errorf("the pause list's query %+v has no declared index", sh)
		}
	}
}
