package fsspy

import (
	"slices"

	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// IndexFor returns the index that serves a query on collection with equality filters on eq (in
// any order) and an inequality or order on orderBy, or false when indexes.Composite lists none. A query of
// equality filters alone (ordered by document id at most: the counts of the storm guard and of
// the invisible rows) needs no composite index: Firestore serves it by merging its automatic
// single-field indexes, and IndexFor reports that as a field-less indexes.Index. gc's range on the
// expiry of a collection of indexes.Expiring is served by the single-field index its TTL
// policy declares.
func IndexFor(collection string, eq []string, orderBy string) (indexes.Index, bool) {
	if orderBy == "" && len(eq) > 0 {
		return indexes.Index{Collection: collection, Query: "equality filters only: Firestore's automatic single-field indexes, merged"}, true
	}
	if orderBy == ledger.ExpireField && len(eq) == 0 {
		for _, e := range indexes.Expiring() {
			if e.Collection == collection {
				return indexes.Index{Collection: collection, Fields: []indexes.Field{{Path: ledger.ExpireField, Order: "ASCENDING"}},
					Query: "expired bookkeeping, oldest expiry first (gc): the TTL field's own single-field index (terraform/firestore_ttl.tf.json)"}, true
			}
		}
	}
	if orderBy != "" && len(eq) == 0 {
		// One field ranged or ordered on, either way, and nothing else: its automatic
		// single-field index (runs list with no filter but --since).
		return indexes.Index{Collection: collection, Query: "one field ordered: Firestore's automatic single-field index"}, true
	}
	for _, ix := range indexes.Composite() {
		if ix.Collection != collection || len(ix.Fields) != len(eq)+1 {
			continue
		}
		last := ix.Fields[len(ix.Fields)-1]
		if last.Path != orderBy {
			continue
		}
		got := make([]string, 0, len(eq))
		for _, f := range ix.Fields[:len(ix.Fields)-1] {
			got = append(got, f.Path)
		}
		want := slices.Clone(eq)
		slices.Sort(got)
		slices.Sort(want)
		if slices.Equal(got, want) {
			return ix, true
		}
	}
	return indexes.Index{}, false
}
