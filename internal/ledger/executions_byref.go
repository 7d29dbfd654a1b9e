package ledger

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
)

// ByRefLimit bounds the rows one completion entry can name: an execution is one row's, and a
// few more are runners that wrote the same reference twice (each is settled on its own word).
const ByRefLimit = 5

// ActiveByRef returns the active rows of provider whose provider_ref.key is one of values (at
// most firestoreconn.InMax), up to ByRefLimit: the rows an executor's completion entry names.
// One query, served by its declared index; a query that finds nothing is billed one read.
func (s *ExecutionStore) ActiveByRef(ctx context.Context, provider, key string, values []string) ([]Execution, error) {
	switch {
	case key == "" || strings.ContainsAny(key, ".`*[]~/"):
		return nil, fmt.Errorf("find executions by provider_ref: key %q is not one field name", key)
	case len(values) == 0 || len(values) > firestoreconn.InMax:
		return nil, fmt.Errorf("find executions by provider_ref.%s: %d values, want 1 to %d", key, len(values), firestoreconn.InMax)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	snaps, err := s.client.Collection(ExecutionsCollection).
		Where("provider", "==", provider).
		Where("active", "==", true).
		Where("provider_ref."+key, "in", values).
		Limit(ByRefLimit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("find executions by provider_ref.%s: %w", key, err)
	}
	return rowsOf(snaps), nil
}

// SettledBy returns the rows whose settlement names workflowRunUUID, up to ByRefLimit: what one
// completion entry settled (its id is executionsync.EndedRunID), which no run record lists. One
// equality query on a single field, served by Firestore's automatic index.
func (s *ExecutionStore) SettledBy(ctx context.Context, workflowRunUUID string) ([]Execution, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	snaps, err := s.client.Collection(ExecutionsCollection).
		Where("settlement.workflow_run_uuid", "==", workflowRunUUID).
		Limit(ByRefLimit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("find executions settled by %s: %w", workflowRunUUID, err)
	}
	return rowsOf(snaps), nil
}

// rowsOf decodes a query's rows; one that does not decode is returned with Malformed set.
func rowsOf(snaps []*firestore.DocumentSnapshot) []Execution {
	rows := make([]Execution, 0, len(snaps))
	for _, snap := range snaps {
		row, err := decodeExecution(snap)
		if err != nil {
			row = Execution{UUID: snap.Ref.ID, Malformed: err.Error()}
		}
		rows = append(rows, row)
	}
	return rows
}
