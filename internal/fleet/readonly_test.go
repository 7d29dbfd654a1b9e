package fleet_test

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestReadOnlyRefusesEveryWriteAndPassesReads(t *testing.T) {
	project := testenv.Project()
	rw := testenv.FirestoreProject(t, project)
	ro := testenv.FirestoreProject(t, project, fleet.ReadOnly()...)
	ctx := t.Context()
	doc := "organizations/o1"
	if _, err := rw.Doc(doc).Set(ctx, map[string]any{"sweeps_enabled": true}); err != nil {
		t.Fatal(err)
	}
	if snap, err := ro.Doc(doc).Get(ctx); err != nil || !snap.Exists() {
		t.Fatalf("read through the read-only connection: %v", err)
	}
	writes := map[string]func() error{
		"set":    func() error { _, err := ro.Doc(doc).Set(ctx, map[string]any{"sweeps_enabled": false}); return err },
		"delete": func() error { _, err := ro.Doc(doc).Delete(ctx); return err },
		"transaction": func() error {
			return ro.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				return tx.Update(ro.Doc(doc), []firestore.Update{{Path: "x", Value: 1}})
			})
		},
	}
	for name, write := range writes {
		if err := write(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s through the read-only connection: %v, want PermissionDenied", name, err)
		}
	}
	snap, err := rw.Doc(doc).Get(ctx)
	if err != nil || snap.Data()["sweeps_enabled"] != true || snap.Data()["x"] != nil {
		t.Errorf("the document changed: %v %v", snap.Data(), err)
	}
}
