package fsspy_test

import (
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
)

func TestIndexFor(t *testing.T) {
	eq := []string{"active", "organization_uuid", "provider"}
	if _, ok := fsspy.IndexFor(ledger.ExecutionsCollection, eq, "observed_at"); !ok {
		t.Error("the scan's index is not found")
	}
	for i, c := range []struct {
		coll, order string
		eq          []string
	}{
		{ledger.ExecutionsCollection, "observed_at", []string{"organization_uuid", "provider"}},
		{ledger.ExecutionsCollection, "completed_at", eq},
		{"other", "observed_at", eq},
		{ledger.ExecutionsCollection, "", nil},
	} {
		if _, ok := fsspy.IndexFor(c.coll, c.eq, c.order); ok {
			t.Errorf("case %d: an index was found for an undeclared query %v", i, c)
		}
	}
	for _, ix := range indexes.Composite() {
		if ix.Query == "" || len(ix.Fields) < 2 {
			t.Errorf("index %s lacks its query or fields", ix)
		}
		if got := ix.String(); !strings.HasPrefix(got, ix.Collection+"(") {
			t.Errorf("index renders as %q", got)
		}
	}
}
