package pausestore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

func TestPauseIDsAreDeterministicAndDistinct(t *testing.T) {
	t.Parallel()
	ids := map[string]string{}
	for _, scope := range []string{"", "fleet", "org", "org/group", "org_group", "org%2Fgroup", "a@fleet"} {
		id := pausestore.PauseID("pm.sweep", scope)
		if other, ok := ids[id]; ok {
			t.Errorf("scopes %q and %q share the id %q", scope, other, id)
		}
		ids[id] = scope
		if err := firestoreconn.CheckDocID(id); err != nil {
			t.Errorf("scope %q: id %q %v", scope, id, err)
		}
		if again := pausestore.PauseID("pm.sweep", scope); again != id {
			t.Errorf("scope %q: id %q then %q", scope, id, again)
		}
	}
	got := pausestore.PauseIDs("t", "org/group")
	want := []string{pausestore.PauseID("t", ""), pausestore.PauseID("t", "org"), pausestore.PauseID("t", "org/group")}
	if !slices.Equal(got, want) {
		t.Errorf("PauseIDs = %q, want %q", got, want)
	}
	if got := pausestore.PauseIDs("t", "fleet"); !slices.Equal(got, want[:1]) {
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
		if got := (pausestore.Pause{Scope: c.pause}).Covers(c.scope); got != c.want {
			t.Errorf("pause %q covers %q = %t, want %t", c.pause, c.scope, got, c.want)
		}
	}
	p := pausestore.Pause{Until: t0}
	if !p.Active(t0.Add(-time.Nanosecond)) || p.Active(t0) {
		t.Error("a pause must hold until its end and not at it")
	}
	if !(pausestore.Pause{}).Active(t0.Add(100 * 365 * 24 * time.Hour)) {
		t.Error("a pause without an end must hold")
	}
}
