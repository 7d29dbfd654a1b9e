package memstore_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

type leasesWorld struct {
	store    leasesettle.Store
	put      func(ledger.WorkspaceLease)
	instance func(ledger.RunnerInstance)
	org      func(id string, enabled bool)
	get      func(id string) ledger.WorkspaceLease
}

func memoryLeases() leasesWorld {
	s := memstore.NewLeases()
	return leasesWorld{store: s, put: s.Put, instance: s.PutInstance, org: s.PutOrganization,
		get: func(id string) ledger.WorkspaceLease { l, _ := s.Get(id); return l }}
}

func ledgerLeases(t *testing.T) func(fs *firestore.Client) leasesWorld {
	return func(fs *firestore.Client) leasesWorld {
		s := ledger.NewLeaseStore(fs, txConfig)
		return leasesWorld{store: s,
			put:      func(l ledger.WorkspaceLease) { set(t, fs, ledger.WorkspaceLeasesCollection+"/"+l.UUID, l) },
			instance: func(in ledger.RunnerInstance) { set(t, fs, ledger.RunnerInstancesCollection+"/"+in.UUID, in) },
			org: func(id string, enabled bool) {
				set(t, fs, ledger.OrganizationsCollection+"/"+id, ledger.Organization{UUID: id, SweepsEnabled: enabled})
			},
			get: func(id string) ledger.WorkspaceLease {
				l, err := ledgertest.Value(s.Row(context.Background(), id))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}}
	}
}

// AbandonLease hands decide the lease, its holder and the organization as its transaction read
// them, and writes exactly what decide returns.
func TestAbandonLeaseReadsWhatTheLedgerReadsAndWritesOnlyWhatDecideSays(t *testing.T) {
	hb := t0.Add(-time.Hour)
	type seen struct {
		view    ledger.HolderView
		enabled bool
		status  string
	}
	for _, c := range []struct {
		name      string
		holder    *ledger.RunnerInstance // nil: no such instance
		org       *bool                  // nil: no organizations document
		readOrg   bool
		refuse    string
		settle    bool
		missing   bool
		want      seen
		wantAband bool
	}{
		{name: "holder terminal, org enabled", holder: &ledger.RunnerInstance{UUID: "h", OrganizationUUID: "o", RunnerGroupUUID: "g", Status: ledger.InstanceFailed},
			org: ptr(true), readOrg: true, settle: true, want: seen{ledger.HolderView{Resolved: true, Status: ledger.InstanceFailed}, true, ledger.LeaseActive}, wantAband: true},
		{name: "holder of another group is unresolvable", holder: &ledger.RunnerInstance{UUID: "h", OrganizationUUID: "o", RunnerGroupUUID: "g2", Status: ledger.InstanceRunning},
			org: ptr(true), readOrg: true, want: seen{ledger.HolderView{}, true, ledger.LeaseActive}},
		{name: "holder missing", readOrg: true, org: ptr(true), settle: true, want: seen{ledger.HolderView{}, true, ledger.LeaseActive}, wantAband: true},
		{name: "organization opted out", org: ptr(false), readOrg: true, refuse: leasesettle.RefuseDisabled, want: seen{ledger.HolderView{}, false, ledger.LeaseActive}},
		{name: "no organization document", readOrg: true, settle: true, want: seen{ledger.HolderView{}, false, ledger.LeaseActive}, wantAband: true},
		{name: "organization not read", org: ptr(true), settle: true, want: seen{ledger.HolderView{}, false, ledger.LeaseActive}, wantAband: true},
		{name: "missing lease", missing: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			implementations(t, memoryLeases, ledgerLeases(t), func(t *testing.T, w leasesWorld) {
				if !c.missing {
					w.put(ledger.WorkspaceLease{UUID: "l", OrganizationUUID: "o", RunnerGroupUUID: "g", WorkspaceID: "ws", HolderUUID: "h",
						Status: ledger.LeaseActive, AcquiredAt: hb, HeartbeatAt: hb})
				}
				if c.holder != nil {
					w.instance(*c.holder)
				}
				if c.org != nil {
					w.org("o", *c.org)
				}
				var reads ledger.Reads
				if c.readOrg {
					reads.Organization = "o"
				}
				called := false
				var got seen
				abandoned, refused, err := w.store.AbandonLease(context.Background(), "l", reads, func(l ledger.WorkspaceLease, v ledger.HolderView, f ledger.Facts) (*ledger.Settlement, string) {
					called = true
					got = seen{v, f.OrganizationEnabled, l.Status}
					if c.refuse != "" {
						return nil, c.refuse
					}
					if c.settle {
						return &ledger.Settlement{At: t0, Reason: "r"}, ""
					}
					return nil, ""
				})
				if err != nil {
					t.Fatal(err)
				}
				if called == c.missing || got != c.want || abandoned != c.wantAband || refused != c.refuse {
					t.Errorf("decide called %v with %+v; abandoned %v refused %q; want %+v %v %q", called, got, abandoned, refused, c.want, c.wantAband, c.refuse)
				}
				if c.missing {
					return
				}
				l := w.get("l")
				if want := map[bool]string{true: ledger.LeaseAbandoned, false: ledger.LeaseActive}[c.wantAband]; l.Status != want ||
					(c.wantAband && (!l.ReleasedAt.Equal(t0) || l.Settlement == nil)) {
					t.Errorf("lease after: status %q released %v settlement %v", l.Status, l.ReleasedAt, l.Settlement)
				}
			})
		})
	}
}

func ptr[T any](v T) *T { return &v }
