package agesweep

import (
	"cmp"
	"time"

	"github.com/stalesweep/stalesweep/internal/storm"
)

// Defaults of Bounds.
const (
	ConcurrencyDefault = 8
	BudgetDefault      = 4 * time.Minute
)

// Bounds are what every age sweep's Config holds besides its scan's (zero: the defaults); the
// Budget stays below the function's deadline.
type Bounds struct {
	Concurrency int // settling transactions at once
	Budget      time.Duration
	Storm       storm.Config
}

// WithDefaults returns b with every zero field set to its default.
func (b Bounds) WithDefaults() Bounds {
	b.Concurrency = cmp.Or(b.Concurrency, ConcurrencyDefault)
	b.Budget = cmp.Or(b.Budget, BudgetDefault)
	b.Storm = b.Storm.WithDefaults()
	return b
}
