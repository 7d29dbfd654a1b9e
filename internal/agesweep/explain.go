package agesweep

import (
	"context"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Rows is what an Explain reads its one row with, besides the sweep's Store: the row by its id,
// its fields as stored and its value as the sweep decodes it.
type Rows[T any] interface {
	Row(ctx context.Context, id string) (ledger.Row[T], error)
}

// Explaining is the first step of an Explain of row e.ID: the row read with row (its fields as
// stored noted in e), and now on clock, the time every check of the explanation is judged at.
func Explaining[T any](ctx context.Context, e *explain.Explanation, clock ledger.Clock,
	row func(ctx context.Context, id string) (ledger.Row[T], error)) (ledger.Row[T], time.Time, error) {
	r, err := row(ctx, e.ID)
	if err != nil {
		return r, time.Time{}, err
	}
	e.Row = r.Fields
	now, err := clock(ctx)
	if err != nil {
		return r, now, fmt.Errorf("read the clock: %w", err)
	}
	return r, now, nil
}
