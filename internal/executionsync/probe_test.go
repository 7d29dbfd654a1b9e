package executionsync_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/memstore"
)

// An organization has work exactly when one of its active rows of the workflow's provider was
// observed min_age_seconds ago or earlier.
func TestTheProbeFindsAStaleRow(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		row      *ledger.Execution
		invisble bool
		want     bool
	}{
		{name: "no rows", want: false},
		{name: "observed just now", row: &ledger.Execution{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-59 * time.Second)}},
		{name: "observed min_age ago", row: &ledger.Execution{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-60 * time.Second)}, want: true},
		{name: "stale without a provider reference", row: &ledger.Execution{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-time.Hour)}, want: true},
		{name: "stale but settled", row: &ledger.Execution{OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: false, ObservedAt: now.Add(-time.Hour)}},
		{name: "stale on Kubernetes", row: &ledger.Execution{OrganizationUUID: "o", Provider: ledger.ProviderKubernetes, Active: true, ObservedAt: now.Add(-time.Hour)}},
		{name: "stale in another organization", row: &ledger.Execution{OrganizationUUID: "o2", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-time.Hour)}},
		{name: "invisible only", invisble: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memstore.NewExecutions()
			if c.row != nil {
				c.row.UUID = "r"
				s.Put(*c.row)
			}
			if c.invisble {
				s.PutInvisible(ledger.Execution{UUID: "i", OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true})
			}
			wf, err := executionsync.New(s, nil, nil, executionsync.Config{Provider: ledger.ProviderCloudRun}, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			in, _ := json.Marshal(executionsync.Input{OrganizationUUID: "o", Limit: 25, MinAgeSeconds: 60})
			got, err := wf.Definition(executionsync.CloudRun).Probe(context.Background(), in, now)
			if err != nil || got != c.want {
				t.Errorf("probe = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
