package orgadmin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestSetSweepsRecordsWhoWhenAndWhyAndIsIdempotent(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	admin := orgadmin.New(fs)
	ctx := context.Background()
	const org = "0f8fad5b-d9cb-469f-a165-70867728950e"
	read := func() map[string]any {
		t.Helper()
		snap, err := fs.Collection(ledger.OrganizationsCollection).Doc(org).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Data()
	}
	// A writer's own field, and sweeps_enabled as a string, which counts as not enabled.
	if _, err := fs.Collection(ledger.OrganizationsCollection).Doc(org).Set(ctx, map[string]any{"name": "acme", "sweeps_enabled": "true"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		enabled     bool
		by, reason  string
		wantChanged bool
		wantBy      string
	}{
		{true, "local:ana@h", "onboarding", true, "local:ana@h"},
		{true, "local:bo@h", "again", false, "local:ana@h"}, // already enabled: the first change's record stays
		{false, "local:bo@h", "INC-7", true, "local:bo@h"},
		{false, "local:cy@h", "", false, "local:bo@h"},
	}
	for i, st := range steps {
		changed, err := admin.SetSweeps(ctx, org, st.enabled, st.by, st.reason)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if changed != st.wantChanged {
			t.Errorf("step %d: changed %t, want %t", i, changed, st.wantChanged)
		}
		got := read()
		if got["sweeps_enabled"] != st.enabled || got["sweeps_changed_by"] != st.wantBy || got["name"] != "acme" || got["sweeps_changed_at"] == nil {
			t.Errorf("step %d: document %v", i, got)
		}
		if ok, err := admin.Enabled(ctx, org); err != nil || ok != st.enabled {
			t.Errorf("step %d: Enabled = %t, %v; want %t", i, ok, err, st.enabled)
		}
	}
	if _, err := admin.SetSweeps(ctx, "a/b", true, "x", ""); err == nil {
		t.Error("an id with a / was accepted")
	}
}

func TestOrganizationListPagesEnabledAndDisabledInIDOrder(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	admin, store := orgadmin.New(fs), ledgertest.Organizations{Client: fs}
	ctx := context.Background()
	for i := range 5 {
		if err := store.Put(ctx, ledger.Organization{UUID: fmt.Sprintf("org-%d", i), SweepsEnabled: i%2 == 0}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after, pages := "", 0
	for {
		orgs, next, err := admin.List(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range orgs {
			got = append(got, fmt.Sprintf("%s:%t", o.UUID, o.SweepsEnabled))
		}
		if next == "" {
			break
		}
		after = next
	}
	want := "[org-0:true org-1:false org-2:true org-3:false org-4:true]"
	if fmt.Sprint(got) != want || pages != 3 {
		t.Errorf("listed %v in %d pages, want %s in 3", got, pages, want)
	}
	if _, _, err := admin.List(ctx, "", orgadmin.ListMax+1); err == nil {
		t.Error("a limit past the maximum was accepted")
	}
}
