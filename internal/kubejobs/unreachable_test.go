package kubejobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/rest"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// A cluster that refuses every connection: the Kubernetes sync reached the executor for no row
// and ends failed, executor_unreachable, not completed.
func TestAKubernetesSyncWhoseClusterRefusesEveryConnectionFailsAsUnreachable(t *testing.T) {
	addr := testenv.FreeAddr(t)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet(SetConfig{Client: ClientConfig{Timeout: time.Second}, Ready: map[string]batchclient.BatchV1Interface{"eu": cs.BatchV1()}})
	a := New(set, Config{Backoff: time.Millisecond})

	fs := testenv.Firestore(t)
	clock := testenv.NewClock(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	ctx := context.Background()
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	writer := ledgertest.Executions{Client: fs}
	org := uuid.NewString()
	testenv.Enable(t, fs, org)
	for _, name := range []string{"build-1", "build-2"} {
		if err := writer.Put(ctx, ledger.Execution{UUID: uuid.NewString(), OrganizationUUID: org, Provider: ledger.ProviderKubernetes,
			ProviderRef: ref(runningJob(name)), Status: ledger.StatusRunning, Active: true, ObservedAt: clock.Now().Add(-10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	engine := syncEngine(t, fs, store, a, clock.Now, 0, 2)
	out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncKubernetes, InitialData: []byte(`{"organization_uuid":"` + org + `"}`), Trigger: workflow.TriggerLocal})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != workflow.StateFailed || out.Output["failure_reason"] != executionsync.ReasonExecutorUnreachable || fmt.Sprint(out.Output["failed_start_count"]) != "2" {
		t.Errorf("run %s, output %v; want failed %s with 2 failed starts", out.Status, out.Output, executionsync.ReasonExecutorUnreachable)
	}
}
