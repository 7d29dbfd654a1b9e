package agesweep

import (
	"context"
	"sync"

	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Settle calls settle for each candidate, at most concurrency at a time, and returns each one's
// result and error, in candidates' order. paused says whether a result is a pause's refusal and
// gives, from the first such result, the result noted for each candidate not tried after it;
// left is that result, or nil when no pause refused one.
func Settle[C, R any](ctx context.Context, candidates []C, concurrency int,
	settle func(ctx context.Context, c C) (R, error), paused func(R) (left R, refused bool)) (results []R, errs []error, left *R) {
	results = make([]R, len(candidates))
	errs = make([]error, len(candidates))
	var mu sync.Mutex
	parallel.ForEach(ctx, len(candidates), concurrency, func(i int) bool {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			return false
		}
		mu.Lock()
		l := left
		mu.Unlock()
		if l != nil {
			results[i], errs[i] = *l, nil
			return false
		}
		results[i], errs[i] = settle(ctx, candidates[i])
		workflow.NoteRow(ctx, errs[i])
		if l, refused := paused(results[i]); refused {
			mu.Lock()
			if left == nil {
				left = &l
			}
			mu.Unlock()
		}
		return errs[i] != nil && ctx.Err() == nil
	})
	return results, errs, left
}
