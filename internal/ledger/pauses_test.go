package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestPauseIDsAreDeterministicAndDistinct(t *testing.T) {
	t.Parallel()
	ids := map[string]string{}
	for _, scope := range []string{"", "fleet", "org", "org/group", "org_group", "org%2Fgroup", "a@fleet"} {
		id := ledger.PauseID("pm.sweep", scope)
		if other, ok := ids[id]; ok {
			t.Errorf("scopes %q and %q share the id %q", scope, other, id)
		}
		ids[id] = scope
		if err := ledger.CheckDocID(id); err != nil {
			t.Errorf("scope %q: id %q %v", scope, id, err)
		}
		if again := ledger.PauseID("pm.sweep", scope); again != id {
			t.Errorf("scope %q: id %q then %q", scope, id, again)
		}
	}
	got := ledger.PauseIDs("t", "org/group")
	want := []string{ledger.PauseID("t", ""), ledger.PauseID("t", "org"), ledger.PauseID("t", "org/group")}
	if !slices.Equal(got, want) {
		t.Errorf("PauseIDs = %q, want %q", got, want)
	}
	if got := ledger.PauseIDs("t", "fleet"); !slices.Equal(got, want[:1]) {
		t.Errorf("a fleet run's PauseIDs = %q, want the fleet's only", got)
	}
}

func TestPauseCoversItsScopeAndTheScopesUnderIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pause, scope string
		want         bool
	}{
		{"", "org", true}, {"", "fleet", true}, {"org", "org", true}, {"org", "org/g", true},
		{"org", "org2", false}, {"org/g", "org", false}, {"org", "other/g", false},
	} {
		if got := (ledger.Pause{Scope: c.pause}).Covers(c.scope); got != c.want {
			t.Errorf("pause %q covers %q = %t, want %t", c.pause, c.scope, got, c.want)
		}
	}
	p := ledger.Pause{Until: t0}
	if !p.Active(t0.Add(-time.Nanosecond)) || p.Active(t0) {
		t.Error("a pause must hold until its end and not at it")
	}
	if !(ledger.Pause{}).Active(t0.Add(100 * 365 * 24 * time.Hour)) {
		t.Error("a pause without an end must hold")
	}
}

func TestPausePutIsIdempotentAndDeleteReportsWhatItRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := testenv.Firestore(t)
	store := ledger.NewPauseStore(fs)
	p := ledger.Pause{WorkflowType: "pm.sweep", Scope: "default", PausedBy: "local:op@h", PausedAt: t0, Reason: "incident 12"}
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
	snap, err := fs.Collection(ledger.PausesCollection).Doc(ledger.PauseID("pm.sweep", "default")).Get(ctx)
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

func TestPauseCheckNamesTheField(t *testing.T) {
	t.Parallel()
	ok := ledger.Pause{WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: t0}
	for field, p := range map[string]ledger.Pause{
		"workflow_type": {PausedBy: "x", PausedAt: t0},
		"paused_by":     {WorkflowType: "pm.sweep", PausedAt: t0},
		"until":         {WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: t0, Until: t0},
		"scope":         {WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: t0, Scope: "org/"},
	} {
		err := p.Check()
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s: Check() = %v, want an error naming %s", field, err, field)
		}
	}
	if err := ok.Check(); err != nil {
		t.Error(err)
	}
}

func TestCoveringFindsTheFleetOrTheScopeAboveAndIgnoresEndedPauses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := ledger.NewPauseStore(fs)
	const typ = "runner.workspace-lease-settle"
	put := func(scope string, until time.Time) {
		t.Helper()
		if err := store.Put(ctx, ledger.Pause{WorkflowType: typ, Scope: scope, PausedBy: "op", PausedAt: t0.Add(-time.Hour), Until: until}); err != nil {
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
		if _, ok := ledger.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
			t.Errorf("the pause list's query %+v has no declared index", sh)
		}
	}
}
