package agesweep

import "context"

// Pages is a run's bounded scan: a page at a time, each after the last row of the one before
// (cursor). want says how many rows the next page may hold (0 or less stops the scan short);
// visit takes each page, told whether it came back full, and says whether to read on. complete
// says a page came back short: the scan read every row there is.
func Pages[R, Cur any](ctx context.Context, page func(ctx context.Context, after *Cur, want int) ([]R, error),
	cursor func(last R) *Cur, want func() int, visit func(page []R, full bool) (more bool)) (complete bool, err error) {
	var after *Cur
	for {
		n := want()
		if n <= 0 {
			return false, nil
		}
		rows, err := page(ctx, after, n)
		if err != nil {
			return false, err
		}
		full := len(rows) >= n
		if !visit(rows, full) {
			return !full, nil
		}
		if !full {
			return true, nil
		}
		after = cursor(rows[len(rows)-1])
	}
}
