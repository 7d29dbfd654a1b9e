package leasesettle_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// stormGroup seeds the group with 24 active leases: 14 of unknown holders and 4 of terminated
// ones, their heartbeats an hour old, and 6 of running holders, a minute old. It returns the
// first 14 (abandoned on age alone) and the 4.
func (e *env) stormGroup() (unresolvable, terminal []string) {
	for range 14 {
		unresolvable = append(unresolvable, e.lease(uuid.NewString(), time.Hour))
	}
	for range 4 {
		terminal = append(terminal, e.lease(e.instance("terminated"), time.Hour))
	}
	for range 6 {
		e.lease(e.instance("running"), time.Minute)
	}
	return unresolvable, terminal
}

// A run that would abandon, on heartbeat age alone, more than half of a group's active leases
// abandons none of those and fails with storm_guard; leases whose holder is terminal are not age
// alone and are still abandoned; an operator overrides it from the command.
func TestTheStormGuardStopsMassAbandonmentOnAgeAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{}, nil)
	unresolvable, terminal := e.stormGroup()
	start := func(override bool) (workflow.Outcome, leasesettle.Output, leasesettle.Stats) {
		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
		out, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Storm: override}})
		if err != nil {
			t.Fatal(err)
		}
		o, s := testenv.DecodeRun[leasesettle.Output, leasesettle.Stats](t, out.Output, out.Stats)
		return out, o, s
	}
	// 14 of 24 active leases on age alone: more than half, more than 10.
	out, o, s := start(false)
	if out.Status != workflow.StateFailed || !errors.Is(out.Err, storm.ErrTripped) {
		t.Fatalf("run: %s %v, want failed by the storm guard", out.Status, out.Err)
	}
	if v := s.StormGuard; v == nil || !v.Tripped || v.Aged != 14 || v.Live != 24 || v.Allowed != 12 {
		t.Errorf("verdict %+v, want 14 on age alone of 24 active, 12 allowed", v)
	}
	if o.Settled != len(terminal) || s.Kept[storm.Reason] != len(unresolvable) {
		t.Errorf("settled %d (want the %d with terminal holders), held back %d (want %d)", o.Settled, len(terminal), s.Kept[storm.Reason], len(unresolvable))
	}
	for _, id := range terminal {
		if l := e.get(id); l.Status != ledger.LeaseAbandoned {
			t.Errorf("lease %s of a terminated holder = %s, want abandoned (exempt from the guard)", id, l.Status)
		}
	}
	for _, id := range unresolvable {
		if l := e.get(id); l.Status != ledger.LeaseActive {
			t.Errorf("lease %s was abandoned on age alone past the guard", id)
		}
	}
	out, o, s = start(true)
	if out.Status != workflow.StateCompleted || o.Settled != len(unresolvable) || s.StormGuard == nil || !s.StormGuard.Overridden {
		t.Errorf("override: %s %v, output %+v, verdict %+v", out.Status, out.Err, o, s.StormGuard)
	}
}

// The guard counts every lease the group would lose on age alone, not only this run's
// max_settlements: a storm settled 5 at a time is still a storm.
func TestTheStormGuardCountsPastMaxSettlements(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{PageSize: 4}, nil)
	for range 12 {
		e.lease(uuid.NewString(), time.Hour)
	}
	for range 8 {
		e.lease(e.instance("running"), time.Minute)
	}
	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group, "max_settlements": 5})
	out, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerSchedule})
	if err != nil {
		t.Fatal(err)
	}
	var s leasesettle.Stats
	testenv.Decode(t, out.Stats, &s)
	if out.Status != workflow.StateFailed || s.StormGuard == nil || s.StormGuard.Aged != 12 || s.StormGuard.Live != 20 {
		t.Errorf("run %s, verdict %+v: want failed, 12 aged of 20 counted past max_settlements 5", out.Status, s.StormGuard)
	}
}

// Past the scan's cap, the stale leases left unread are counted as if on age alone.
func TestTheStormGuardCountsWhatTheScanCapLeftUnread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, leasesettle.Config{PageSize: 3, MaxExamined: 6}, nil)
	for range 12 {
		e.lease(uuid.NewString(), time.Hour)
	}
	for range 8 {
		e.lease(e.instance("running"), time.Minute)
	}
	raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
	out, err := e.Engine.Start(context.Background(), workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw, Trigger: workflow.TriggerSchedule})
	if err != nil {
		t.Fatal(err)
	}
	var o leasesettle.Output
	var s leasesettle.Stats
	testenv.Decode(t, out.Stats, &s)
	testenv.Decode(t, out.Output, &o)
	if out.Status != workflow.StateFailed || !s.ScanCapped || o.Examined != 6 || o.Settled != 0 || s.StormGuard == nil || s.StormGuard.Aged != 12 || s.StormGuard.Live != 20 {
		t.Errorf("run %s, output %+v, stats %+v: want the 6 unread stale leases counted (12 aged of 20), nothing settled", out.Status, o, s)
	}
}
