package agesweep

import (
	"context"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Rows is what an Explain reads its one row with, besides the sweep's Store.
type Rows[T any] interface {
	Row(ctx context.Context, id string) (ledger.Row[T], error)
}

// Explaining is the first step of an Explain of row e.ID: the row read with row (its fields as
// stored noted in e), and now on clock, the time every check of the explanation is judged at.
func Explaining[T any](ctx context.Context, e *explain.Explanation, clock firestoreconn.Clock,
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

// Scan names, for an Explain, what a sweep's scan reads of a row before any rule is asked: its
// staleness field, which must hold a timestamp for a scan to see the row, and its decoding,
// without which the scan skips it.
type Scan struct {
	Field   string // the staleness field: "last_moved_at"
	Noun    string // the row: "run"
	Settler string // what settles it: "sweep"
	Settles string // what the settler does: "settles"
}

// Checks are the scan's two checks of a row: its staleness field stamped, and its decoding.
func (s Scan) Checks(fields map[string]any, stamped bool, malformed string) (valid, decodes explain.Check) {
	return explain.Check{Name: s.Field + " valid", OK: stamped, Detail: explain.TimestampDetail(fields[s.Field])},
		explain.Check{Name: "decodes", OK: malformed == "", Detail: explain.DecodeDetail(malformed)}
}

// Skipped sets e's verdict, skip, for a row no scan reads, and says whether it did; no rule is
// asked of such a row.
func (s Scan) Skipped(e *explain.Explanation, stamped bool, malformed string) bool {
	switch {
	case !stamped:
		e.Verdict, e.Rule = "skip", "invisible"
		e.Detail = fmt.Sprintf("%s is missing or not a timestamp: no scan sees the %s, so no %s %s it (counted in stats.invisible)", s.Field, s.Noun, s.Settler, s.Settles)
	case malformed != "":
		e.Verdict, e.Rule = "skip", "malformed"
		e.Detail = fmt.Sprintf("the %s does not decode: the %s skips it (counted in stats.malformed)", s.Noun, s.Settler)
	default:
		return false
	}
	return true
}
