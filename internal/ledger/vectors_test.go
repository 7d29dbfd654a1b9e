package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// TestTheProductsOwnEntriesVerifyWithAReferenceCanonicalizer runs a task's whole lifecycle
// through the ledger — enqueue, claim, heartbeats, reports with awkward text, a reclaim by a
// sweeper with an awkward name, a second claim, a failure — and recomputes every stored entry's
// id from the documented encoding with the RFC author's canonicalizer, not ledger.EntryID.
func TestTheProductsOwnEntriesVerifyWithAReferenceCanonicalizer(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	store := ledger.NewTaskStore(fs, ledger.TxConfig{})
	worker := ledgertest.Tasks{Client: fs}
	ctx := context.Background()
	queue, tasks := "q<&>", []string{"t-é日本😀", "t-plain"}
	at := time.Date(2026, 12, 1, 18, 27, 45, 907880123, time.UTC) // nanoseconds, a trailing zero
	tick := func() time.Time { at = at.Add(123 * time.Millisecond); return at }
	for _, id := range tasks {
		if err := worker.Enqueue(ctx, queue, id, "slug <&> "+id, tick()); err != nil {
			t.Fatal(err)
		}
	}
	for range tasks {
		l, err := worker.Next(ctx, queue, "w<1>&\u2028", tick())
		if err != nil {
			t.Fatal(err)
		}
		if l, err = worker.Heartbeat(ctx, l, at.Truncate(time.Second)); err != nil { // a whole second
			t.Fatal(err)
		}
		if _, err := worker.Report(ctx, l, "say \"hi\"\\ \t\n \u0001 <b>&</b> naïve 😀 \u2029", tick()); err != nil {
			t.Fatal(err)
		}
		task, err := ledgertest.Value(store.Row(ctx, queue, l.TaskID))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.ReclaimTask(ctx, queue, l.TaskID, "ops<&>", nil, tick(), pmsweep.Reclaimable(task, 0)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := worker.Next(ctx, queue, "w-2", tick())
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Fail(ctx, l, "exit 1: <stderr> & \"more\"", tick()); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, id := range tasks {
		for _, chain := range []string{ledger.ChainStatuses, ledger.ChainReports, ledger.ChainHeartbeats} {
			snaps, err := fs.Collection(ledger.TaskQueuesCollection).Doc(queue).Collection(ledger.TasksCollection).Doc(id).Collection(chain).Documents(ctx).GetAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, snap := range snaps {
				d := snap.Data()
				created, ok := d["created_at"].(time.Time)
				if !ok {
					t.Fatalf("%s: created_at is %T", snap.Ref.Path, d["created_at"])
				}
				var plain bytes.Buffer
				enc := json.NewEncoder(&plain)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(map[string]any{
					"chain": chain, "created_at": created.UTC().Format("2006-01-02T15:04:05.000000Z"),
					"payload": d["payload"], "prev": d["prev"], "task": id,
				}); err != nil {
					t.Fatal(err)
				}
				canonical, err := jsoncanonicalizer.Transform(plain.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(canonical)
				if got := hex.EncodeToString(sum[:]); got != snap.Ref.ID {
					t.Errorf("%s: the documented encoding gives %s\n  from %s", snap.Ref.Path, got, canonical)
				}
				checked++
			}
		}
	}
	// 2 tasks × (new, working, reclaimed) statuses + 1 more claim and a failure; 2 reports;
	// heartbeats: claim, heartbeat, preempt each, and the second claim.
	if want := 2*3 + 2 + 2 + 2*3 + 1; checked != want {
		t.Errorf("checked %d entries, want %d", checked, want)
	}
	t.Logf("%d entries written by the ledger verify under RFC 8785 with the reference canonicalizer", checked)
}
