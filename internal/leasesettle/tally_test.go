package leasesettle_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// tally is what a run decided, in a form a table can state.
type tally struct {
	settled             map[string]string // lease → reason
	kept, refused       map[string]int
	examined, raced     int
	errored, overBudget int
	scanCapped          bool
	outcome             string
	sweeptest.Steps
}

// The decision and tally logic of one run over one runner group, against the in-memory store
// (both tiers): which leases are abandoned and why, which are kept and why, and how each is
// counted.
func TestSettleDecidesAndCountsEachLease(t *testing.T) {
	now := epoch
	const timeout = 300
	stale, fresh := now.Add(-time.Hour), now.Add(-time.Minute)
	// lease puts an active lease of group g held by holder, its heartbeat at `at`.
	lease := func(s *memstore.Leases, id, holder string, at time.Time) {
		s.Put(ledger.WorkspaceLease{UUID: id, OrganizationUUID: "o", RunnerGroupUUID: "g", WorkspaceID: "ws-" + id, HolderUUID: holder,
			Status: ledger.LeaseActive, AcquiredAt: at, HeartbeatAt: at})
	}
	instance := func(s *memstore.Leases, id, group, status string) {
		s.PutInstance(ledger.RunnerInstance{UUID: id, OrganizationUUID: "o", RunnerGroupUUID: group, Status: status})
	}
	// healthy gives the group enough live leases that the storm guard stays out of the way.
	healthy := func(s *memstore.Leases, n int) {
		instance(s, "alive", "g", ledger.InstanceRunning)
		for i := range n {
			lease(s, fmt.Sprintf("live-%02d", i), "alive", fresh)
		}
	}
	in := leasesettle.Input{OrganizationUUID: "o", RunnerGroupUUID: "g", MaxSettlements: 50}
	for _, c := range []struct {
		name            string
		cfg             leasesettle.Config
		in              leasesettle.Input
		override        bool
		includeDisabled bool
		seed            func(s *memstore.Leases)
		want            tally
	}{
		{
			name: "each lease by its holder and heartbeat",
			in:   in,
			seed: func(s *memstore.Leases) {
				instance(s, "dead", "g", ledger.InstanceTerminated)
				instance(s, "elsewhere", "g2", ledger.InstanceRunning)
				lease(s, "terminal-fresh", "dead", fresh)
				lease(s, "alive-stale", "alive", stale)
				lease(s, "gone-stale", "nobody", stale)
				lease(s, "gone-fresh", "nobody", fresh)
				lease(s, "other-group-stale", "elsewhere", stale)
				healthy(s, 20)
			},
			want: tally{examined: 25,
				settled: map[string]string{"terminal-fresh": leasesettle.ReasonHolderTerminal, "gone-stale": leasesettle.ReasonHolderUnresolvableStale,
					"other-group-stale": leasesettle.ReasonHolderUnresolvableStale},
				kept: map[string]int{leasesettle.KeepHolderAlive: 21, leasesettle.KeepHeartbeatFresh: 1}, outcome: "settled", Steps: sweeptest.Steps{Aged: 2, Live: 25}},
		},
		{
			name: "max_settlements bounds the abandoned; the rest are over budget",
			in:   leasesettle.Input{OrganizationUUID: "o", RunnerGroupUUID: "g", MaxSettlements: 2},
			seed: func(s *memstore.Leases) {
				instance(s, "dead", "g", ledger.InstanceFailed)
				for i := range 4 {
					lease(s, fmt.Sprintf("d%d", i), "dead", stale.Add(time.Duration(i)*time.Second))
				}
				healthy(s, 20)
			},
			want: tally{examined: 24, settled: map[string]string{"d0": leasesettle.ReasonHolderTerminal, "d1": leasesettle.ReasonHolderTerminal},
				overBudget: 2, kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "settled", Steps: sweeptest.Steps{Live: 24}},
		},
		{
			name: "a page of leases that must be kept does not starve the ones behind it",
			in:   in,
			cfg:  leasesettle.Config{PageSize: 2},
			seed: func(s *memstore.Leases) {
				instance(s, "dead", "g", ledger.InstanceStopped)
				for i := range 3 {
					lease(s, fmt.Sprintf("k%d", i), "alive", stale.Add(time.Duration(i)*time.Second))
				}
				lease(s, "behind", "dead", stale.Add(time.Minute))
				healthy(s, 20)
			},
			want: tally{examined: 24, settled: map[string]string{"behind": leasesettle.ReasonHolderTerminal},
				kept: map[string]int{leasesettle.KeepHolderAlive: 23}, outcome: "settled", Steps: sweeptest.Steps{Live: 24}},
		},
		{
			name: "leases that moved or whose holder came back are raced",
			in:   in,
			seed: func(s *memstore.Leases) {
				lease(s, "beat", "nobody", stale)
				lease(s, "back", "returning", stale)
				lease(s, "gone", "nobody", stale)
				healthy(s, 20)
				s.Before = func(id string) {
					switch id {
					case "beat":
						s.Heartbeat(id, now)
					case "back":
						instance(s, "returning", "g", ledger.InstanceRunning)
					}
				}
			},
			want: tally{examined: 23, settled: map[string]string{"gone": leasesettle.ReasonHolderUnresolvableStale}, raced: 2,
				kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "settled", Steps: sweeptest.Steps{Aged: 3, Live: 23}},
		},
		{
			name: "an organization that opts out during the run is refused",
			in:   in,
			seed: func(s *memstore.Leases) {
				lease(s, "gone", "nobody", stale)
				healthy(s, 20)
				s.Before = func(string) { s.PutOrganization("o", false) }
			},
			want: tally{examined: 21, refused: map[string]int{leasesettle.RefuseDisabled: 1}, settled: map[string]string{},
				kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "nothing_to_settle", Steps: sweeptest.Steps{Aged: 1, Live: 21}},
		},
		{
			name:            "the operator's include-disabled settles it anyway",
			in:              in,
			includeDisabled: true,
			seed: func(s *memstore.Leases) {
				lease(s, "gone", "nobody", stale)
				healthy(s, 20)
				s.PutOrganization("o", false)
			},
			want: tally{examined: 21, settled: map[string]string{"gone": leasesettle.ReasonHolderUnresolvableStale},
				kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "settled", Steps: sweeptest.Steps{Aged: 1, Live: 21}},
		},
		{
			name: "malformed leases are counted and skipped; invisible ones reported",
			in:   in,
			seed: func(s *memstore.Leases) {
				lease(s, "gone", "nobody", stale)
				s.Put(ledger.WorkspaceLease{UUID: "bad", OrganizationUUID: "o", RunnerGroupUUID: "g", Status: ledger.LeaseActive, HeartbeatAt: stale, Malformed: "x"})
				s.PutInvisible(ledger.WorkspaceLease{UUID: "inv", OrganizationUUID: "o", RunnerGroupUUID: "g", Status: ledger.LeaseActive})
				healthy(s, 20)
			},
			want: tally{examined: 22, settled: map[string]string{"gone": leasesettle.ReasonHolderUnresolvableStale},
				kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "settled", Steps: sweeptest.Steps{Malformed: 1, Invisible: 1, Aged: 1, Live: 22}},
		},
		{
			name: "a failed transaction is counted; the others go ahead",
			in:   in,
			seed: func(s *memstore.Leases) {
				lease(s, "gone", "nobody", stale)
				lease(s, "fails", "nobody", stale)
				healthy(s, 20)
				s.Fail = func(op, id string) error {
					if op == "AbandonLease" && id == "fails" {
						return errors.New("aborted")
					}
					return nil
				}
			},
			want: tally{examined: 22, errored: 1, settled: map[string]string{"gone": leasesettle.ReasonHolderUnresolvableStale},
				kept: map[string]int{leasesettle.KeepHolderAlive: 20}, outcome: "settled", Steps: sweeptest.Steps{Aged: 2, Live: 22}},
		},
		{
			name: "the storm guard keeps the leases abandoned on age alone, not those of terminal holders",
			in:   in,
			seed: func(s *memstore.Leases) {
				instance(s, "dead", "g", ledger.InstanceFailed)
				lease(s, "terminal", "dead", stale)
				for i := range 11 {
					lease(s, fmt.Sprintf("g%02d", i), "nobody", stale)
				}
				healthy(s, 9)
			},
			want: tally{examined: 21, settled: map[string]string{"terminal": leasesettle.ReasonHolderTerminal},
				kept: map[string]int{storm.Reason: 11, leasesettle.KeepHolderAlive: 9}, outcome: "settled", Steps: sweeptest.Steps{Aged: 11, Live: 21, Tripped: true, Failed: storm.Reason}},
		},
		{
			name:     "an operator's override goes past the guard",
			in:       in,
			override: true,
			seed: func(s *memstore.Leases) {
				for i := range 11 {
					lease(s, fmt.Sprintf("g%02d", i), "nobody", stale)
				}
				healthy(s, 9)
			},
			want: tally{examined: 20, settled: func() map[string]string {
				m := map[string]string{}
				for i := range 11 {
					m[fmt.Sprintf("g%02d", i)] = leasesettle.ReasonHolderUnresolvableStale
				}
				return m
			}(), kept: map[string]int{leasesettle.KeepHolderAlive: 9}, outcome: "settled", Steps: sweeptest.Steps{Aged: 11, Live: 20, Tripped: true, Overridden: true}},
		},
		{
			name: "at the scan's cap the unread stale leases count toward the guard as age alone",
			in:   in,
			cfg:  leasesettle.Config{MaxExamined: 4, PageSize: 2},
			seed: func(s *memstore.Leases) {
				for i := range 12 {
					lease(s, fmt.Sprintf("g%02d", i), "nobody", stale.Add(time.Duration(i)*time.Second))
				}
				healthy(s, 11)
			},
			want: tally{examined: 4, scanCapped: true, settled: map[string]string{},
				kept: map[string]int{storm.Reason: 4}, outcome: "nothing_to_settle", Steps: sweeptest.Steps{Aged: 12, Live: 23, Tripped: true, Failed: storm.Reason}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.NewLeases()
			s.PutGroup(ledger.RunnerGroup{UUID: "g", OrganizationUUID: "o", HeartbeatTimeoutSeconds: timeout})
			s.PutOrganization("o", true)
			c.seed(s)
			cfg := c.cfg
			cfg.Concurrency = 1
			wf := leasesettle.New(s, cfg, ledgertest.LocalClock(func() time.Time { return now }))
			out, stats, err := wf.RunOnce(context.Background(), workflow.Run{UUID: "run-1", Logger: logging.Discard(),
				Overrides: workflow.Overrides{Storm: c.override, OptOut: c.includeDisabled}}, c.in)
			got := tally{settled: map[string]string{}, kept: maps.Clone(stats.Kept), examined: out.Examined, raced: stats.Raced,
				errored: stats.Errored, overBudget: stats.OverBudget, scanCapped: stats.ScanCapped, outcome: out.Outcome}
			if len(stats.Refused) > 0 {
				got.refused = maps.Clone(stats.Refused)
			}
			for _, st := range out.Settlements {
				got.settled[st.LeaseUUID] = st.Reason
			}
			if out.Settled != len(out.Settlements) {
				t.Errorf("settled %d, but %d settlements listed", out.Settled, len(out.Settlements))
			}
			got.Steps = sweeptest.StepsOf(t, stats.Steps, err)
			sweeptest.Tallied(t, got, c.want, nil)
			// What the output lists is what the store holds: abandoned by this run, for that reason.
			for _, st := range out.Settlements {
				if l, _ := s.Get(st.LeaseUUID); l.Status != ledger.LeaseAbandoned || l.Settlement == nil ||
					l.Settlement.Reason != st.Reason || l.Settlement.WorkflowRunUUID != "run-1" {
					t.Errorf("listed %s as abandoned, the store holds %+v", st.LeaseUUID, l)
				}
			}
		})
	}
}
