package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

func TestATickPublishesNoSweepForAPausedScopeAndDoesForAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newDispatchEnv(t, 3, 0)
	pauses := pausestore.New(e.fs)
	paused, other := e.enabled[0], e.enabled[1:]
	put := func(typ contract.WorkflowType, scope string, until time.Time) {
		t.Helper()
		if err := pauses.Put(ctx, pausestore.Pause{WorkflowType: string(typ), Scope: scope, PausedBy: "op", PausedAt: time.Now().Add(-time.Hour), Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	put(tick.WorkflowType, paused, time.Time{})
	put(contract.ExecutionSyncKubernetes, "", time.Time{})             // another workflow's fleet pause
	put(tick.WorkflowType, e.enabled[1], time.Now().Add(-time.Minute)) // ended
	d := e.build(pipeline.DispatcherOptions{Config: pipeline.DispatchConfig{PageSize: 2}, Pauses: pauses})
	dispatch := func(id string) (pipeline.Report, map[string]bool) {
		t.Helper()
		tk := tick
		tk.TickID = id
		rep, err := d.Dispatch(ctx, tk)
		if err != nil {
			t.Fatal(err)
		}
		sweeps := e.ps.sweeps(t)
		published := map[string]bool{}
		for _, org := range e.enabled {
			_, published[org] = sweeps[pipeline.RunUUID(id, tk.WorkflowType, org)]
		}
		return rep, published
	}
	rep, published := dispatch("tick-paused")
	if rep.Scopes != 3 || rep.Paused != 1 || rep.Published != 2 || rep.PausedFleet {
		t.Errorf("report = %+v, want 3 scopes, 1 paused, 2 published", rep)
	}
	if published[paused] || !published[other[0]] || !published[other[1]] {
		t.Errorf("published %v: want every organization but the paused %s", published, paused)
	}

	if _, err := pauses.Delete(ctx, string(tick.WorkflowType), paused); err != nil {
		t.Fatal(err)
	}
	rep, published = dispatch("tick-resumed")
	if rep.Paused != 0 || rep.Published != 3 || !published[paused] {
		t.Errorf("after resume: report %+v, published %v", rep, published)
	}

	put(tick.WorkflowType, "", time.Time{})
	rep, published = dispatch("tick-fleet")
	if !rep.PausedFleet || rep.Published != 0 || rep.Scopes != 0 {
		t.Errorf("fleet pause: report %+v, want nothing enumerated or published", rep)
	}
	for org, ok := range published {
		if ok {
			t.Errorf("fleet pause: %s's sweep was published", org)
		}
	}
}
