package executor

import "context"

// Executor is one executor adapter as the execution-sync workflow uses it.
type Executor interface {
	// ValidRef reports whether a row's provider_ref is one this executor can look up.
	ValidRef(ref map[string]any) bool
	// Observe asks the executor about the execution ref names.
	Observe(ctx context.Context, ref map[string]any) (Snapshot, error)
	// Target names where the executor looks for it (see the package doc).
	Target(ref map[string]any) string
}
