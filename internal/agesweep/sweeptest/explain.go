package sweeptest

import (
	"testing"

	"github.com/stalesweep/stalesweep/internal/explain"
)

// ExplainEach is each of ids' explanation, as of gives it; an error fails t.
func ExplainEach(t testing.TB, ids []string, of func(id string) (explain.Explanation, error)) map[string]explain.Explanation {
	t.Helper()
	said := make(map[string]explain.Explanation, len(ids))
	for _, id := range ids {
		x, err := of(id)
		if err != nil {
			t.Fatalf("explain %s: %v", id, err)
		}
		said[id] = x
	}
	return said
}

// ExplainAgrees fails t for each of ids whose explanation (said) disagrees with what the sweep
// then did: verdict settle exactly when the sweep settled it (settled) and exactly when a scan
// sees it. noun names a row ("run", "task") and did what the sweep does to one ("swept").
func ExplainAgrees(t testing.TB, said map[string]explain.Explanation, ids []string, settle string, settled map[string]bool, noun, did string) {
	t.Helper()
	for _, id := range ids {
		x := said[id]
		if (x.Verdict == settle) != settled[id] || (x.Verdict == settle) != x.Visible {
			t.Errorf("%s %s: explain said %s (%s, visible %t), the sweep %s it: %t", noun, id, x.Verdict, x.Rule, x.Visible, did, settled[id])
		}
	}
}
