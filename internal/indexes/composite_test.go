package indexes_test

import (
	"slices"
	"testing"

	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// The event path finds rows by the provider_ref field each adapter names: its indexes are
// declared on those fields (spelled out in composite.go, which the adapters' tests import).
func TestTheEventPathsIndexesNameTheAdaptersRefFields(t *testing.T) {
	for _, key := range []string{cloudrun.RefKey, kubejobs.RefUID} {
		want := []indexes.Field{{Path: "provider", Order: "ASCENDING"}, {Path: "active", Order: "ASCENDING"}, {Path: "provider_ref." + key, Order: "ASCENDING"}}
		if !slices.ContainsFunc(indexes.Composite(), func(ix indexes.Index) bool {
			return ix.Collection == ledger.ExecutionsCollection && slices.Equal(ix.Fields, want)
		}) {
			t.Errorf("no index on %s (provider, active, provider_ref.%s)", ledger.ExecutionsCollection, key)
		}
	}
}
