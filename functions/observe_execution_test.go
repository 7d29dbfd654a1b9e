package functions

import (
	"context"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
)

// publishEntry publishes a log entry to the ends topic, as the module's log sink does.
func publishEntry(t *testing.T, data []byte) {
	t.Helper()
	ctx := context.Background()
	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	pub := ps.Publisher(pipeline.EndsDefault)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: data}).Get(ctx); err != nil {
		t.Fatal(err)
	}
}

// An execution that finishes in the fake, its entry published to the ends topic twice, settles
// its row once, through the push to ObserveExecution, though the row is far younger than any
// sweep's age.
func TestAFinishedExecutionsEntrySettlesItsRowThroughThePipeline(t *testing.T) {
	w := newWorld(t)
	rec := watchPushes(t)
	id := w.execution(t, w.org, kindRunning, time.Now().Add(-time.Second))
	name := w.row(t, id).ProviderRef["execution"].(string)
	if err := fake.SetExecution(cloudrunfake.Succeeded(name, time.Now())); err != nil {
		t.Fatal(err)
	}
	entry := logentrytest.CloudRunEnd(name, "pipeline-"+id, "", time.Now())
	publishEntry(t, entry)
	publishEntry(t, entry)
	await(t, 30*time.Second, "both deliveries of the entry to be acknowledged", func() (bool, string) {
		s := rec.summary("ObserveExecution")
		return s.Acked == 2, s.String()
	})
	r := w.row(t, id)
	if r.Outcome != ledger.OutcomeSucceeded || r.Settlement.Evidence[executionsync.EvidencePath] != "event" || r.Settlement.Evidence[executionsync.EvidenceInsertID] != "pipeline-"+id {
		t.Errorf("row %+v settlement %+v", r, r.Settlement)
	}
	writes := 0
	for doc, n := range spy.WritesTouching("settlement") {
		if fsspy.DocID(doc) == id {
			writes += n
		}
	}
	if writes != 1 {
		t.Errorf("%d settlement writes, want 1", writes)
	}
}

// A message on the ends topic that is no log entry, or names no row, is acknowledged (200), not
// redelivered forever.
func TestObserveExecutionAcknowledgesWhatItCannotUse(t *testing.T) {
	for name, data := range map[string][]byte{
		"not JSON":                      []byte("not a log entry"),
		"another log":                   []byte(`{"insertId": "x", "logName": "projects/p/logs/stdout", "resource": {"type": "cloud_run_job"}}`),
		"no row":                        logentrytest.CloudRunEnd(cloudrunfake.ExecutionName("p", "l", "job", "nobody"), "no-row", "", time.Now()),
		"a Kubernetes Job no row names": logentrytest.JobEnd("c", "ns", "job", "uid-none", "Completed", "k-1", time.Now()),
	} {
		t.Run(name, func(t *testing.T) {
			if code, _, body := send(t, http.MethodPost, "/ObserveExecution", nil, pushBody(data, nil, "m-"+name)); code != http.StatusOK {
				t.Errorf("answered %d %s, want 200", code, body)
			}
		})
	}
}
