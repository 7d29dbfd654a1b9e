package blindguard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// countingStore is the judgments' store, counting the judgments it records.
type countingStore struct {
	*targetstore.Store
	records atomic.Int64
}

func (s *countingStore) Record(ctx context.Context, t ledger.Target) (ledger.Target, error) {
	s.records.Add(1)
	return s.Store.Record(ctx, t)
}

// A target that answers is judged and stored, healthy as it is, at most once per Interval per
// process: the second answer within the Interval writes nothing; one after it judges again.
func TestSeenStoresAHealthyTargetsJudgmentOncePerInterval(t *testing.T) {
	fs := testenv.FirestoreProject(t, testenv.Project())
	store := &countingStore{Store: targetstore.New(fs, ledger.Retention{})}
	g := blindguard.New(store, blindguard.Config{}, logging.Discard())
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	const target = "cloud_run:projects/p/locations/europe-west9"

	g.Seen(ctx, target, now)
	got, found, err := store.Get(ctx, target)
	if err != nil || !found || got.Blind || !got.JudgedAt.Equal(now) || got.Asked != 0 || got.Unknown != 0 {
		t.Fatalf("after Seen: %+v, found %t, %v; want a healthy judgment at %s", got, found, err, now)
	}
	g.Seen(ctx, target, now.Add(blindguard.Interval/2))
	if n := store.records.Load(); n != 1 {
		t.Errorf("Seen within the Interval recorded %d judgments, want 1", n)
	}
	g.Seen(ctx, target, now.Add(blindguard.Interval))
	if n := store.records.Load(); n != 2 {
		t.Errorf("Seen after the Interval recorded %d judgments in all, want 2", n)
	}
	g.Seen(ctx, "", now)
	if targets, err := store.List(ctx, 10); err != nil || len(targets) != 1 {
		t.Errorf("targets listed: %+v, %v; want the one that answered", targets, err)
	}
}
