package reliability_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/runssweep"
)

// splitAbandon is a deliberately broken runs-sweep store: it abandons an invocation in separate
// writes — status first, settlement next, interlock last — where the ledger makes one
// transaction, so a run cut between them leaves the row torn.
type splitAbandon struct {
	*ledger.ExtensionRunStore
	fs *firestore.Client
}

func (s splitAbandon) Abandon(ctx context.Context, runID string, _ []string, st ledger.Settlement, _ func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	ref := s.fs.Collection(ledger.ExtensionRunsCollection).Doc(runID)
	snap, err := ref.Get(ctx)
	if err != nil {
		return ledger.Abandonment{}, err
	}
	var r ledger.ExtensionRun
	if err := snap.DataTo(&r); err != nil {
		return ledger.Abandonment{}, err
	}
	if _, err := ref.Update(ctx, []firestore.Update{
		{Path: "status", Value: ledger.ExtensionFailed}, {Path: "outcome", Value: ledger.OutcomeAbandoned}, {Path: "finished_at", Value: st.At},
	}); err != nil {
		return ledger.Abandonment{}, err
	}
	out := ledger.Abandonment{Swept: true}
	lock := s.fs.Collection(ledger.ExtensionInterlocksCollection).Doc(ledger.InterlockID(r.TenantID, r.ExtensionID))
	if r.Background {
		if l, err := lock.Get(ctx); err == nil {
			holder, _ := l.Data()["run_id"].(string)
			out.InterlockReleased, out.InterlockHolder = holder == runID, holder
			if holder == runID {
				out.InterlockHolder = ""
			}
		}
	}
	if _, err := ref.Update(ctx, []firestore.Update{{Path: "settlement", Value: ledger.AbandonSettlement(st, r, out)}}); err != nil {
		return ledger.Abandonment{}, err
	}
	if out.InterlockReleased {
		if _, err := lock.Delete(ctx); err != nil {
			return ledger.Abandonment{}, err
		}
	}
	return out, nil
}

// The crash trials bite: with the abandonment split over several writes, an uncancelled run
// still leaves every row complete, and cutting the run at each of its calls in turn leaves some
// row torn — which the trials must report. Not parallel: it checks goroutines too.
func TestTheCrashTrialsReportARowTornAcrossSeparateWrites(t *testing.T) {
	r := runsSweepRigWith(t, func(r *rig, store *ledger.ExtensionRunStore) runssweep.Store {
		return splitAbandon{ExtensionRunStore: store, fs: r.fs}
	})
	r.warm(t)
	ls := newLockstep(t)
	var mu sync.Mutex
	var reported []string
	tornSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range reported {
			if strings.Contains(msg, "is torn after the cut run") {
				return msg
			}
		}
		return ""
	}
	m := member{t: t, name: "runs-sweep with a split abandonment", record: func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, msg)
	}}
	ls.join()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer ls.leave()
		ls.await(ls.takeBaseline)
		n, _ := calibrate(m, r, ls)
		if len(reported) > 0 {
			t.Errorf("the split abandonment fails the uncancelled run already, so cutting proves nothing: %v", reported)
			return
		}
		tally := crashTally{}
		// Every call in turn, from the middle of the run, where its abandonments are, round to
		// its start; the first torn row reported ends the search.
		for i := range n {
			if tornSeen() != "" {
				break
			}
			k := (n/2+i)%n + 1
			crashTrialOnce(m, r, k, cut{k: k}, n, &tally, ls)
		}
	})
	wg.Wait()
	if msg := tornSeen(); msg == "" {
		t.Errorf("no cut of a run whose abandonment spans separate writes was reported torn; reported: %v", reported)
	} else {
		t.Logf("reported, as it must be: %s", msg)
	}
}
