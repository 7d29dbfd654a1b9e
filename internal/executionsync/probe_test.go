package executionsync_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
)

// An organization has work exactly when one of its active rows of this provider was observed
// min_age_seconds ago or earlier. The probe asks for a batch of organizations at once and answers
// each; an organization asked with another min_age_seconds is judged by its own.
func TestTheProbeFindsAStaleRow(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		row      *ledger.Execution
		invisble bool
		minAge   int64
		want     bool
	}{
		{name: "no rows", want: false},
		{name: "observed just now", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-59 * time.Second)}},
		{name: "observed min_age ago", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-60 * time.Second)}, want: true},
		{name: "stale without a provider reference", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-time.Hour)}, want: true},
		{name: "stale but settled", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: false, ObservedAt: now.Add(-time.Hour)}},
		{name: "stale on Kubernetes", row: &ledger.Execution{Provider: ledger.ProviderKubernetes, Active: true, ObservedAt: now.Add(-time.Hour)}},
		{name: "invisible only", invisble: true},
		{name: "stale at its own longer min_age", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-2 * time.Hour)}, minAge: 3600, want: true},
		{name: "not stale at its own longer min_age", row: &ledger.Execution{Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-30 * time.Minute)}, minAge: 3600},
	}
	s := memstore.NewExecutions()
	s.Put(ledger.Execution{UUID: "elsewhere", OrganizationUUID: "not-asked", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: now.Add(-time.Hour)})
	var inputs []json.RawMessage
	for i, c := range cases {
		org := fmt.Sprint("o", i)
		if c.row != nil {
			c.row.UUID, c.row.OrganizationUUID = fmt.Sprint("r", i), org
			s.Put(*c.row)
		}
		if c.invisble {
			s.PutInvisible(ledger.Execution{UUID: fmt.Sprint("i", i), OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Active: true})
		}
		in, _ := json.Marshal(executionsync.Input{OrganizationUUID: org, Limit: 25, MinAgeSeconds: cmp.Or(c.minAge, 60)})
		inputs = append(inputs, in)
	}
	wf, err := executionsync.New(s, nil, nil, executionsync.Config{Provider: ledger.ProviderCloudRun}, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	def := wf.Definition(executionsync.CloudRun)
	if def.ProbeBatch != firestoreconn.InMax {
		t.Errorf("the probe takes %d organizations at once, want %d", def.ProbeBatch, firestoreconn.InMax)
	}
	got, err := def.Probe(context.Background(), inputs, now)
	if err != nil || len(got) != len(cases) {
		t.Fatalf("probe = %v, %v; want %d answers", got, err, len(cases))
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%s: probe = %v, want %v", c.name, got[i], c.want)
		}
	}
}
