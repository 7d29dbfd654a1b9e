package ledger

import (
	"context"
	"fmt"
	"strings"

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
	rows := make([]Execution, 0, len(snaps))
	for _, snap := range snaps {
		row, err := decodeExecution(snap)
		if err != nil {
			row = Execution{UUID: snap.Ref.ID, Malformed: err.Error()}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
