package ledger

import (
	"context"
	"fmt"
)

// What a runner writes of its executions: the reference writer of docs/writers.md, in Go.
// stalesweep never calls it in production; the tests, the demo and the benchmarks use it.

// Put writes a whole row, as a runner would. Tests and the demo use it.
func (s *ExecutionStore) Put(ctx context.Context, e Execution) error {
	if _, err := s.ref(e.UUID).Set(ctx, e); err != nil {
		return fmt.Errorf("put execution %s: %w", e.UUID, err)
	}
	return nil
}
