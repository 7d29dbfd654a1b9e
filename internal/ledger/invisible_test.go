package ledger_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// beforeSecondCount is a stream interceptor that runs move once, just before the second
// aggregation query is sent.
func beforeSecondCount(move func()) grpc.DialOption {
	var counts atomic.Int64
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &sendHook{ClientStream: cs, before: func(m any) {
			if _, ok := m.(*firestorepb.RunAggregationQueryRequest); ok && counts.Add(1) == 2 {
				move()
			}
		}}, nil
	})
}

type sendHook struct {
	grpc.ClientStream
	before func(any)
}

func (h *sendHook) SendMsg(m any) error {
	h.before(m)
	return h.ClientStream.SendMsg(m)
}

// The count of rows no scan can see reads one snapshot: rows settled between its two counts (a
// run settles its rows while the count runs) change nothing in what it reports.
func TestInvisibleCountsOneSnapshotWhileTheScopeMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	project := testenv.Project()
	other := testenv.FirestoreProject(t, project)
	col := other.Collection(ledger.ExecutionsCollection)
	var visible []*firestore.DocumentRef
	for range 20 {
		ref := col.NewDoc()
		if _, err := ref.Set(ctx, map[string]any{"organization_uuid": "o", "provider": ledger.ProviderCloudRun, "active": true,
			"observed_at": time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		visible = append(visible, ref)
	}
	for _, id := range []string{"inv-1", "inv-2"} {
		if _, err := col.Doc(id).Set(ctx, map[string]any{"organization_uuid": "o", "provider": ledger.ProviderCloudRun, "active": true,
			"observed_at": "yesterday"}); err != nil {
			t.Fatal(err)
		}
	}
	moved := false
	fs := testenv.FirestoreProject(t, project, beforeSecondCount(func() {
		moved = true
		for _, ref := range visible[:15] { // a run settles 15 rows between the two counts
			if _, err := ref.Update(ctx, []firestore.Update{{Path: "active", Value: false}}); err != nil {
				t.Error(err)
			}
		}
	}))
	inv, err := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{}).Invisible(ctx, "o", ledger.ProviderCloudRun)
	if err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the scope was not moved between the counts")
	}
	if inv.Count != 2 || len(inv.Sample) != 2 {
		t.Errorf("invisible = %+v, want the 2 rows", inv)
	}
}
