package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

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
