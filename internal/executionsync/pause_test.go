package executionsync_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

func (e *env) pause(typ contract.WorkflowType, scope string) {
	e.t.Helper()
	err := pausestore.New(e.fs).Put(context.Background(), pausestore.Pause{WorkflowType: string(typ), Scope: scope,
		PausedBy: "op", PausedAt: e.clock.Now(), Reason: "incident"})
	if err != nil {
		e.t.Error(err)
	}
}

// A pause taken while a run's syncs are in flight stops them: each row's transaction reads the
// fleet's and the organization's pause and refuses, unless the run was told to override it.
func TestAPauseTakenWhileASyncIsInFlightIsRefusedInItsTransaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		touch    func(e *env)
		override bool
		refused  bool
	}{
		{"its organization is paused", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, e.org) }, false, true},
		{"its workflow is paused fleet-wide", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, "") }, false, true},
		{"its organization is paused; the run overrides it", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, e.org) }, true, false},
		{"another organization is paused", func(e *env) { e.pause(contract.ExecutionSyncCloudRun, e.other) }, false, false},
		{"another workflow is paused fleet-wide", func(e *env) { e.pause(contract.ExecutionSyncKubernetes, "") }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, s := racedRun(t, func(e *env, _ string) { tt.touch(e) }, workflow.Request{Overrides: workflow.Overrides{Pause: tt.override}})
			switch {
			case !tt.refused && (r.Active || s.Settled["succeeded"] != 1):
				t.Errorf("row active=%t, stats %+v; want it settled", r.Active, s)
			case tt.refused && (!r.Active || r.Sync.Attempts != 0 || s.Refused[executionsync.RefusePaused] != 1):
				t.Errorf("row active=%t attempts=%d, refused %v; want it untouched and refused %s", r.Active, r.Sync.Attempts, s.Refused, executionsync.RefusePaused)
			}
		})
	}
}

// The Pub/Sub path's sync (SyncExecution) is refused the same way, and no message can override:
// resuming lets the redelivered sync settle the row.
func TestASyncMessageOfAPausedOrganizationIsRefusedUntilResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	ctx := context.Background()
	id := e.stale(succeeded)
	row := e.get(id)
	run, syncer := e.messageSyncer()
	raw, _ := json.Marshal(message.Sync{WorkflowRunUUID: run, OrganizationUUID: e.org, RunnerExecutionUUID: id,
		Provider: ledger.ProviderCloudRun, ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt, OverridePause: true})
	var req message.Sync
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	e.pause(contract.ExecutionSyncCloudRun, e.org)
	e.spy.Reset()
	if res := syncer.SyncOnce(ctx, req); res.Outcome != executionsync.SyncRefused || res.Why != executionsync.RefusePaused {
		t.Fatalf("a sync of a paused organization: %+v, want refused %s", res, executionsync.RefusePaused)
	}
	if w := e.spy.Writes(); len(w) != 0 {
		t.Errorf("the refused sync wrote %+v", w)
	}
	if _, err := pausestore.New(e.fs).Delete(ctx, string(contract.ExecutionSyncCloudRun), e.org); err != nil {
		t.Fatal(err)
	}
	if res := syncer.SyncOnce(ctx, req); res.Outcome != executionsync.SyncSettled {
		t.Errorf("after resume: %+v, want settled", res)
	}
}
