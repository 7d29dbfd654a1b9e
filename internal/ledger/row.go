package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNoRow is the error of a row read by id that does not exist.
var ErrNoRow = errors.New("no such document")

// Row is one document as stored, read by id: its fields as Firestore returns them, and the row
// decoded, or why it does not decode.
type Row[T any] struct {
	Fields    map[string]any
	Value     T
	Malformed string // the decoding error; Value is then the zero value
}

// HasTimestamp reports whether field holds a timestamp: a scan filters and orders on its
// staleness field, and sees only rows where it does (Invisible).
func (r Row[T]) HasTimestamp(field string) bool {
	_, ok := r.Fields[field].(time.Time)
	return ok
}

func getRow[T any](ctx context.Context, ref *firestore.DocumentRef, timeout time.Duration) (Row[T], error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	snap, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Row[T]{}, fmt.Errorf("%s: %w", ref.Path, ErrNoRow)
	}
	if err != nil {
		return Row[T]{}, fmt.Errorf("get %s: %w", ref.Path, err)
	}
	r := Row[T]{Fields: snap.Data()}
	r.Malformed = decodeScanned(snap, &r.Value)
	return r, nil
}

// Row reads one app invocation as stored.
func (s *ExtensionRunStore) Row(ctx context.Context, runID string) (Row[ExtensionRun], error) {
	r, err := getRow[ExtensionRun](ctx, s.run(runID), s.cfg.Timeout)
	r.Value.RunID = runID
	return r, err
}

// Row reads one task of a queue as stored.
func (s *TaskStore) Row(ctx context.Context, queue, id string) (Row[Task], error) {
	r, err := getRow[Task](ctx, s.task(queue, id), s.cfg.Timeout)
	r.Value.Queue, r.Value.ID = queue, id
	return r, err
}

// Row reads one workspace lease as stored.
func (s *LeaseStore) Row(ctx context.Context, leaseID string) (Row[WorkspaceLease], error) {
	r, err := getRow[WorkspaceLease](ctx, s.lease(leaseID), s.cfg.Timeout)
	r.Value.UUID = leaseID
	return r, err
}
