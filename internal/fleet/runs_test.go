package fleet_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestListRunsFiltersOrdersNewestFirstAndPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	runs, hist := runstore.New(fs), fleet.NewRunHistory(fs)
	type spec struct {
		id, typ, scope, status string
		at                     time.Duration
	}
	specs := []spec{
		{"r1", "pm.sweep", "default", "completed", 1},
		{"r2", "pm.sweep", "other", "completed", 2},
		{"r3", "pm.sweep", "default", "failed", 3},
		{"r4", "runner.workspace-lease-settle", "o/g", "completed", 4},
		{"r5a", "pm.sweep", "default", "completed", 5}, // r5a and r5b start at the same time:
		{"r5b", "pm.sweep", "default", "completed", 5}, // the id breaks the tie, descending
		{"r6", "pm.sweep", "default", "completed", 6},
	}
	for _, s := range specs {
		err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: s.id, WorkflowType: s.typ, Scope: s.scope, Status: s.status,
			InitiatedAt: t0.Add(s.at * time.Minute), InitialData: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
	}
	all := func(q fleet.RunQuery) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			page, err := hist.ListRuns(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if q.Limit > 0 && len(page.Runs) > q.Limit {
				t.Fatalf("a page of %d runs, limit %d", len(page.Runs), q.Limit)
			}
			for _, r := range page.Runs {
				ids = append(ids, r.WorkflowRunUUID)
			}
			if page.Next == "" {
				return ids
			}
			q.PageToken = page.Next
		}
	}
	for i, c := range []struct {
		q    fleet.RunQuery
		want []string
	}{
		{fleet.RunQuery{}, []string{"r6", "r5b", "r5a", "r4", "r3", "r2", "r1"}},
		{fleet.RunQuery{Limit: 2}, []string{"r6", "r5b", "r5a", "r4", "r3", "r2", "r1"}},
		{fleet.RunQuery{Limit: 1, WorkflowType: "pm.sweep"}, []string{"r6", "r5b", "r5a", "r3", "r2", "r1"}},
		{fleet.RunQuery{WorkflowType: "pm.sweep", Scope: "default", Limit: 2}, []string{"r6", "r5b", "r5a", "r3", "r1"}},
		{fleet.RunQuery{Status: "failed"}, []string{"r3"}},
		{fleet.RunQuery{WorkflowType: "pm.sweep", Status: "completed", Since: t0.Add(2 * time.Minute)}, []string{"r6", "r5b", "r5a", "r2"}},
		{fleet.RunQuery{WorkflowType: "pm.sweep", Scope: "default", Status: "completed", Limit: 3}, []string{"r6", "r5b", "r5a", "r1"}},
		{fleet.RunQuery{Since: t0.Add(5 * time.Minute)}, []string{"r6", "r5b", "r5a"}},
		{fleet.RunQuery{WorkflowType: "runner.workspace-lease-settle", Scope: "o"}, nil},
	} {
		spy.Reset()
		if got := all(c.q); !slices.Equal(got, c.want) {
			t.Errorf("case %d %+v: got %q, want %q", i, c.q, got, c.want)
		}
		for _, q := range spy.Queries() {
			sh := fsspy.Shape(q)
			if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
				t.Errorf("case %d: query %+v has no declared index", i, sh)
			}
			if lim := q.GetLimit().GetValue(); lim < 1 || lim > fleet.RunListLimitMax+1 {
				t.Errorf("case %d: query limit %d", i, lim)
			}
		}
	}
}

func TestListRunsRefusesBadQueriesNamingTheField(t *testing.T) {
	t.Parallel()
	runs := fleet.NewRunHistory(testenv.Firestore(t))
	for field, q := range map[string]fleet.RunQuery{
		"limit":      {Limit: fleet.RunListLimitMax + 1},
		"scope":      {Scope: "default"},
		"page_token": {PageToken: "not a token"},
	} {
		_, err := runs.ListRuns(context.Background(), q)
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want an error naming %s", field, err, field)
		}
	}
}

func TestLatestOfOrganizationFindsTheNewestRunOnAnyOfItsScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	runs, hist := runstore.New(fs), fleet.NewRunHistory(fs)
	const lease = "runner.workspace-lease-settle"
	for _, r := range []struct {
		id, typ, org, group string
		at                  time.Duration
	}{
		{"g1-old", lease, "o", "g1", 1},
		{"g2-new", lease, "o", "g2", 3},
		{"other-org", lease, "o2", "g1", 9},
		{"other-type", "runner.execution-sync-stale-cloud-run", "o", "", 8},
	} {
		data := map[string]any{"organization_uuid": r.org}
		scope := r.org
		if r.group != "" {
			data["runner_group_uuid"], scope = r.group, r.org+"/"+r.group
		}
		if err := runs.CreateRun(ctx, runstore.RunRecord{WorkflowRunUUID: r.id, WorkflowType: r.typ, Scope: scope, Status: "completed",
			InitiatedAt: t0.Add(r.at * time.Minute), InitialData: data}); err != nil {
			t.Fatal(err)
		}
	}
	spy.Reset()
	got, ok, err := hist.LatestOfOrganization(ctx, lease, "o")
	if err != nil || !ok || got.WorkflowRunUUID != "g2-new" {
		t.Errorf("newest lease settle of o: %q %t %v, want g2-new", got.WorkflowRunUUID, ok, err)
	}
	if _, ok, err := hist.LatestOfOrganization(ctx, lease, "none"); ok || err != nil {
		t.Errorf("an organization without runs: %t %v", ok, err)
	}
	for _, q := range spy.Queries() {
		sh := fsspy.Shape(q)
		if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
			t.Errorf("query %+v has no declared index", sh)
		}
		if q.GetLimit().GetValue() != 1 {
			t.Errorf("query limit %d, want 1", q.GetLimit().GetValue())
		}
	}
}
