package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// A completion entry finds the active rows of its provider whose reference names its execution,
// in one query, and nothing else: not a settled row, not another provider's, not another name.
func TestActiveByRefFindsTheActiveRowsThatNameAnExecution(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	runner := ledgertest.Executions{Client: fs}
	ctx := context.Background()
	put := func(id, provider string, active bool, ref map[string]any) {
		t.Helper()
		if err := runner.Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: "org", Provider: provider, Active: active, Status: "running",
			ObservedAt: t0, ProviderRef: ref}); err != nil {
			t.Fatal(err)
		}
	}
	byID, byNumber := "projects/p/locations/l/jobs/j/executions/e1", "projects/123/locations/l/jobs/j/executions/e1"
	put("by-id", ledger.ProviderCloudRun, true, map[string]any{"execution": byID})
	put("by-number", ledger.ProviderCloudRun, true, map[string]any{"execution": byNumber})
	put("settled", ledger.ProviderCloudRun, false, map[string]any{"execution": byID})
	put("other-execution", ledger.ProviderCloudRun, true, map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e2"})
	put("other-provider", ledger.ProviderKubernetes, true, map[string]any{"execution": byID})
	put("job", ledger.ProviderKubernetes, true, map[string]any{"cluster": "c", "namespace": "n", "job": "j", "uid": "u-1"})
	spy.Reset()

	rows, err := store.ActiveByRef(ctx, ledger.ProviderCloudRun, "execution", []string{byID, byNumber})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.UUID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"by-id", "by-number"}) {
		t.Errorf("found %v, want by-id and by-number", got)
	}
	if q := spy.Queries(); len(q) != 1 {
		t.Errorf("%d queries, want 1", len(q))
	}
	rows, err = store.ActiveByRef(ctx, ledger.ProviderKubernetes, "uid", []string{"u-1"})
	if err != nil || len(rows) != 1 || rows[0].UUID != "job" {
		t.Errorf("by uid: %v %v", rows, err)
	}
	spy.Reset()
	if rows, err := store.ActiveByRef(ctx, ledger.ProviderCloudRun, "execution", []string{"projects/p/locations/l/jobs/j/executions/none"}); err != nil || len(rows) != 0 {
		t.Errorf("an execution no row names: %v %v", rows, err)
	}
	if got := spy.BilledReads(); got != 1 {
		t.Errorf("a lookup that finds nothing billed %d reads, want 1", got)
	}
	for _, bad := range []struct {
		key    string
		values []string
		want   string
	}{
		{"", []string{"x"}, "not one field name"},
		{"a.b", []string{"x"}, "not one field name"},
		{"execution", nil, "want 1 to 30"},
		{"execution", make([]string, 31), "want 1 to 30"},
	} {
		if _, err := store.ActiveByRef(ctx, ledger.ProviderCloudRun, bad.key, bad.values); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ActiveByRef(%q, %d values) = %v, want an error saying %q", bad.key, len(bad.values), err, bad.want)
		}
	}
}
