package leasesettle_test

import (
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

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
