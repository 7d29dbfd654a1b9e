package leasesettle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsfaulttest"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// pauser is the real store, but it has an operator pause the workflow right after the run's
// first abandonment commits, and counts the abandonments tried.
type pauser struct {
	leasesettle.Store
	sweeptest.PauseAfterFirst
}

func (p *pauser) AbandonLease(ctx context.Context, id string, reads ledger.Reads, decide func(ledger.WorkspaceLease, ledger.HolderView, ledger.Facts) (*ledger.Settlement, string)) (bool, string, error) {
	abandoned, refused, err := p.Store.AbandonLease(ctx, id, reads, decide)
	p.Tried()
	return abandoned, refused, err
}

// A pause of the runner group, of its organization or fleet-wide, taken while a run is
// abandoning leases, stops the leases it has not abandoned yet: the next transaction reads the
// pause with its lease and writes nothing, the run tries no further lease, and its stats count
// them refused "paused". A run told to override the pause goes on, and another group's pause
// stops nothing.
func TestAPauseTakenMidRunStopsTheLeasesNotYetAbandoned(t *testing.T) {
	type pause struct {
		scope    func(e *env) string
		override bool
	}
	sweeptest.RunPauseMidSweep(t, []sweeptest.MidSweep[pause]{
		{Name: "its group is paused", Paused: true, Case: pause{func(e *env) string { return e.org + "/" + e.group }, false}},
		{Name: "its organization is paused", Paused: true, Case: pause{func(e *env) string { return e.org }, false}},
		{Name: "it is paused fleet-wide", Paused: true, Case: pause{func(*env) string { return "" }, false}},
		{Name: "its group is paused; the run overrides it", Paused: false, Case: pause{func(e *env) string { return e.org + "/" + e.group }, true}},
		{Name: "another group of its organization is paused", Paused: false, Case: pause{func(e *env) string { return e.org + "/" + e.group + "-other" }, false}},
	}, func(t *testing.T, c pause) sweeptest.Swept {
		var p *pauser
		// One lease at a time, so that the pause falls between two abandonments.
		e := newEnv(t, leasesettle.Config{Bounds: agesweep.Bounds{Concurrency: 1}}, func(s leasesettle.Store) leasesettle.Store { p = &pauser{Store: s}; return p })
		p.Pause = sweeptest.PauseWith(t, e.FS, func() pausestore.Pause {
			return pausestore.Pause{WorkflowType: string(contract.WorkspaceLeaseSettle),
				Scope: c.scope(e), PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "INC-42"}
		})
		ids := []string{e.lease(e.instance("terminated"), time.Minute), e.lease(e.instance("stopped"), time.Minute), e.lease(e.instance("failed"), time.Minute)}

		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
		out := sweeptest.Completed(t, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw,
			Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Pause: c.override}}, "run")
		o, s := testenv.DecodeRun[leasesettle.Output, leasesettle.Stats](t, out.Output, out.Stats)
		abandoned := 0
		for _, id := range ids {
			switch l := e.get(id); {
			case l.Status == ledger.LeaseAbandoned:
				abandoned++
			case l.Status != ledger.LeaseActive || l.Settlement != nil:
				t.Errorf("lease %s left, but written: %+v", id, l)
			}
		}
		if s.Raced != 0 {
			t.Errorf("stats %+v: a lease counted raced, but none moved", s)
		}
		return sweeptest.Swept{Settled: abandoned, Listed: o.Settled, Paused: s.Refused[leasesettle.RefusePaused], Calls: p.Calls(), Said: fmt.Sprintf("stats %+v", s)}
	})
}

// A dry run reads the pause as the abandonments would: its preview refuses the paused group's
// leases "paused", and, told to override the pause, says what the run would abandon. Either way
// it writes nothing.
func TestADryRunOfAPausedGroupPreviewsThePause(t *testing.T) {
	sweeptest.RunDryRunPaused(t, "abandon", "refuse/paused", func(t *testing.T, override bool) sweeptest.DryPaused {
		e := newEnv(t, leasesettle.Config{}, nil)
		sweeptest.Pause(t, e.FS, pausestore.Pause{WorkflowType: string(contract.WorkspaceLeaseSettle),
			Scope: e.org, PausedBy: "op", PausedAt: e.Clock.Now(), Reason: "INC-42"})
		ids := []string{e.lease(e.instance("terminated"), time.Minute), e.lease(e.instance("stopped"), time.Minute)}
		e.Spy.Reset()
		raw, _ := json.Marshal(map[string]any{"organization_uuid": e.org, "runner_group_uuid": e.group})
		s, p := sweeptest.DryPreview(t, e.Engine, workflow.Request{Type: contract.WorkspaceLeaseSettle, InitialData: raw,
			Trigger: workflow.TriggerLocal, DryRun: true, Overrides: workflow.Overrides{Pause: override}},
			func(s leasesettle.Stats) *explain.Preview { return s.Preview })
		for _, id := range ids {
			if l := e.get(id); l.Status != ledger.LeaseActive {
				t.Errorf("the dry run wrote lease %s: %+v", id, l)
			}
		}
		return sweeptest.DryPaused{Preview: p, Paused: s.Refused[leasesettle.RefusePaused], Spy: e.Spy}
	})
}

// Holders whose clocks are an hour off either way, heartbeating as a live holder does, never
// lose their leases — even when they cannot be resolved, the only case judged on heartbeat age;
// a lease Firestore last saw two hours ago is abandoned (sweeptest.RunClockSkew).
func TestHoldersAndRunsWithClocksAnHourOffChangeNothing(t *testing.T) {
	sweeptest.RunClockSkew(t, func(t *testing.T, fs *firestore.Client, clock firestoreconn.Clock) (workflow.Definition, sweeptest.Scope) {
		store := ledger.NewLeaseStore(fs, ledger.TxConfig{})
		ctx := context.Background()
		org, group := uuid.NewString(), uuid.NewString()
		testenv.Enable(t, fs, org)
		// An hour less a minute: any clock an hour off on either side would cross it.
		if err := (ledgertest.Leases{Client: fs}).PutGroup(ctx, ledger.RunnerGroup{UUID: group, OrganizationUUID: org, HeartbeatTimeoutSeconds: 3540}); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(map[string]any{"organization_uuid": org, "runner_group_uuid": group})
		return leasesettle.New(store, leasesettle.Config{}, clock).Definition(), sweeptest.Scope{
			Input: raw,
			Live: func(ctx context.Context, name string, holder func() time.Time) error {
				// The holder's instance record is missing: only the heartbeat's age speaks for it.
				lease := ledger.WorkspaceLease{UUID: name, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: name, HolderUUID: "unregistered-" + name}
				if err := (ledgertest.Leases{Client: fs}).Acquire(ctx, lease, holder()); err != nil {
					return err
				}
				return (ledgertest.Leases{Client: fs}).Heartbeat(ctx, name, lease.HolderUUID)
			},
			Dead: func(ctx context.Context, name string, at time.Time) error {
				longAgo := ledgertest.Leases{Client: fs, Now: testenv.Fixed(at)}
				return longAgo.Acquire(ctx, ledger.WorkspaceLease{UUID: name, OrganizationUUID: org, RunnerGroupUUID: group, WorkspaceID: name, HolderUUID: "gone"}, time.Now())
			},
			Check: func(t *testing.T, out workflow.Outcome, live []string) {
				var o leasesettle.Output
				testenv.Decode(t, out.Output, &o)
				if o.Examined != 3 || o.Settled != 1 || o.Settlements[0].LeaseUUID != "dead" {
					t.Errorf("output %+v, want only the lease Firestore last saw two hours ago abandoned", o)
				}
				for _, name := range live {
					if l, err := ledgertest.Value(store.Row(context.Background(), name)); err != nil || l.Status != ledger.LeaseActive {
						t.Errorf("the live holder whose clock is %s lost its lease: %+v %v", name, l, err)
					}
				}
			},
		}
	})
}

// An abandonment whose commit landed but whose answer was lost (Unavailable, which the client
// retries into "transaction is invalid or closed", or DeadlineExceeded) is read back: the lease
// carries this run's settlement, so it counts as settled by this run and is listed in its
// settlements with the fields it would have had. One whose commit never landed is abandoned by
// the run's extra try, and the read-back must not have counted it first.
func TestAnAmbiguousAbandonmentIsCountedByWhatTheLeaseHolds(t *testing.T) {
	sweeptest.EachAmbiguous(t, func(t *testing.T, fault *fsfaulttest.Commits) {
		e := newEnv(t, leasesettle.Config{}, nil)
		gone := e.instance(ledger.InstanceTerminated)
		ids := []string{e.lease(gone, time.Minute), e.lease(gone, 2*time.Minute)}
		e.lease(e.instance(ledger.InstanceRunning), time.Minute)
		slices.Sort(ids)

		store := ledger.NewLeaseStore(fault.Client(t, e.FS), ledger.TxConfig{})
		wf := leasesettle.New(store, leasesettle.Config{}, ledgertest.LocalClock(e.Clock.Now))
		run := workflow.Run{UUID: uuid.NewString(), Logger: logging.Discard()}
		out, stats, err := wf.RunOnce(context.Background(), run, leasesettle.Input{OrganizationUUID: e.org, RunnerGroupUUID: e.group, MaxSettlements: 10})
		if err != nil {
			t.Fatal(err)
		}
		if fault.Faulted() != 2 {
			t.Fatalf("faulted %d commits, want 2 (one per abandonment)", fault.Faulted())
		}
		var listed []string
		for _, s := range out.Settlements {
			listed = append(listed, s.LeaseUUID)
			if s.HolderUUID != gone || s.Reason != leasesettle.ReasonHolderTerminal || s.WorkspaceID == "" {
				t.Errorf("settlement %+v lacks the fields the run decided", s)
			}
		}
		slices.Sort(listed)
		if out.Settled != 2 || !slices.Equal(listed, ids) || stats.Raced != 0 || stats.Errored != 0 || out.Outcome != "settled" {
			t.Fatalf("settled %d %v, raced %d, errored %d, outcome %s; want %v settled by this run", out.Settled, listed, stats.Raced, stats.Errored, out.Outcome, ids)
		}
		for _, id := range ids {
			if l := e.get(id); l.Status != ledger.LeaseAbandoned || l.Settlement == nil || l.Settlement.WorkflowRunUUID != run.UUID {
				t.Errorf("%s: %+v, want abandoned by this run", id, l)
			}
		}
	})
}

// A runner group has work exactly when it has an active lease.
func TestTheProbeFindsAnActiveLease(t *testing.T) {
	for _, c := range []struct {
		name   string
		status string
		group  string
		want   bool
	}{
		{name: "no leases", want: false},
		{name: "an active lease, heartbeat fresh", status: ledger.LeaseActive, group: "g", want: true},
		{name: "only released leases", status: ledger.LeaseReleased, group: "g", want: false},
		{name: "an active lease of another group", status: ledger.LeaseActive, group: "g2", want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewLeases()
			if c.status != "" {
				s.Put(ledger.WorkspaceLease{UUID: "l", OrganizationUUID: "o", RunnerGroupUUID: c.group, Status: c.status, HeartbeatAt: epoch})
			}
			sweeptest.Probe(t, leasesettle.New(s, leasesettle.Config{}, ledgertest.LocalClock(func() time.Time { return epoch })).Definition(),
				leasesettle.Input{OrganizationUUID: "o", RunnerGroupUUID: "g", MaxSettlements: 10}, epoch, c.want)
		})
	}
}
