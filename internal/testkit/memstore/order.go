package memstore

import (
	"slices"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// key is where a row sits in a scan's order: its staleness field, then its id.
type key struct {
	at time.Time
	id string
}

func (a key) compare(b key) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// page sorts rows by their key and returns up to limit of them after the cursor (nil: from the
// start), as a query ordered by the field and the document id with StartAfter does.
func page[T any](rows []T, keyOf func(T) key, after *key, limit int) []T {
	slices.SortFunc(rows, func(a, b T) int { return keyOf(a).compare(keyOf(b)) })
	out := []T{}
	for _, r := range rows {
		if len(out) == limit {
			break
		}
		if after != nil && keyOf(r).compare(*after) <= 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// invisible reports ids as the ledger does: their count, and a sample of the first by id.
func invisible(ids []string) ledger.Invisible {
	slices.Sort(ids)
	out := ledger.Invisible{Count: int64(len(ids))}
	if len(ids) > 0 {
		out.Sample = slices.Clone(ids[:min(len(ids), ledger.InvisibleSampleMax)])
	}
	return out
}

// countWhat names a count in its error as the ledger's does: all the live rows when before is
// zero, else the stale ones.
func countWhat(before time.Time, all, stale string) string {
	if before.IsZero() {
		return all
	}
	return stale
}
