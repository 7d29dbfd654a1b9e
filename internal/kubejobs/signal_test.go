package kubejobs

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// The event path for Kubernetes: a Job's end event, found by the Job's uid, settles the row
// tracking it on the API server's word, whatever the row's age; a Job still retrying is left
// alone whatever the event says, and another organization's row is not touched.
func TestAJobsEndEventSettlesItsRowOnTheAPIServersWord(t *testing.T) {
	fs := testenv.Firestore(t)
	ctx := context.Background()
	done, retrying, other := succeededJob("build-1"), retryingJob("build-2"), succeededJob("build-3")
	a, _ := adapter(t, done, retrying, other)
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	org, otherOrg := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, org, otherOrg)
	now := time.Now()
	put := func(o string, r map[string]any) string {
		t.Helper()
		id := uuid.NewString()
		if err := (ledgertest.Executions{Client: fs}).Put(ctx, ledger.Execution{UUID: id, OrganizationUUID: o, Provider: ledger.ProviderKubernetes,
			ProviderRef: r, Status: ledger.StatusRunning, Active: true, ObservedAt: now.Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	doneRow, retryingRow, otherRow := put(org, ref(done)), put(org, ref(retrying)), put(otherOrg, ref(other))
	sig := Signal
	sig.Provider = ledger.ProviderKubernetes
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: a, Kind: executionsync.Kubernetes})
	obs := executionsync.NewObserver(executionsync.ObserverConfig{Rows: store, Signals: []logentry.Signal{sig},
		Syncers: map[string]*executionsync.Syncer{ledger.ProviderKubernetes: syncer}})
	observe := func(name, uid, reason string) executionsync.Observation {
		t.Helper()
		o, err := obs.Observe(ctx, logentrytest.JobEnd("prod-eu", "runners", name, uid, reason, "k8s-"+name, now), now, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := observe("build-1", string(done.UID), "Completed"); len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncSettled {
		t.Errorf("the finished Job's event: %+v", o)
	}
	if o := observe("build-2", string(retrying.UID), "BackoffLimitExceeded"); len(o.Results) != 1 || o.Results[0].Outcome != executionsync.SyncNotEnded {
		t.Errorf("a retrying Job's event: %+v, want not_ended", o)
	}
	get := func(id string) ledger.Execution {
		r, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := get(doneRow); r.Active || r.Outcome != ledger.OutcomeSucceeded || r.Settlement.Evidence[executionsync.EvidencePath] != "event" {
		t.Errorf("the finished Job's row: %+v", r)
	}
	if r := get(retryingRow); !r.Active || r.Settlement != nil {
		t.Errorf("the retrying Job's row: %+v", r)
	}
	if r := get(otherRow); !r.Active {
		t.Errorf("another organization's row, whose Job no event named, was settled: %+v", r)
	}
}
