package agesweep_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stalesweep/stalesweep/internal/agesweep"
)

// rows is a scope of n rows, 0 oldest, read a page at a time after a cursor.
func rows(n int, asked *[]int) func(context.Context, *int, int) ([]int, error) {
	return func(_ context.Context, after *int, want int) ([]int, error) {
		*asked = append(*asked, want)
		from := 0
		if after != nil {
			from = *after + 1
		}
		var page []int
		for i := from; i < n && len(page) < want; i++ {
			page = append(page, i)
		}
		return page, nil
	}
}

func next(last int) *int { return &last }

func TestPagesReadsEveryRowOnceAndSaysItReadThemAll(t *testing.T) {
	t.Parallel()
	var asked, seen []int
	complete, err := agesweep.Pages(context.Background(), rows(7, &asked), next, func() int { return 3 }, func(page []int, full bool) bool {
		if full != (len(page) == 3) {
			t.Errorf("page %v told full = %v", page, full)
		}
		seen = append(seen, page...)
		return true
	})
	if err != nil || !complete || !slices.Equal(seen, []int{0, 1, 2, 3, 4, 5, 6}) || !slices.Equal(asked, []int{3, 3, 3}) {
		t.Errorf("complete %v, %v, seen %v, asked %v; want every row once, in three pages", complete, err, seen, asked)
	}
}

func TestPagesStopsWhereWantOrVisitSaysAndIsThenNotComplete(t *testing.T) {
	t.Parallel()
	var asked []int
	read := 0
	complete, err := agesweep.Pages(context.Background(), rows(100, &asked), next, func() int { return min(4, 10-read) }, func(page []int, _ bool) bool {
		read += len(page)
		return true
	})
	if err != nil || complete || read != 10 || !slices.Equal(asked, []int{4, 4, 2}) {
		t.Errorf("complete %v, %v, read %d, asked %v; want the scan cut at 10 rows", complete, err, read, asked)
	}
	asked = nil
	complete, _ = agesweep.Pages(context.Background(), rows(100, &asked), next, func() int { return 4 }, func([]int, bool) bool { return false })
	if complete || len(asked) != 1 {
		t.Errorf("complete %v after %d pages; want one page and not complete", complete, len(asked))
	}
}

func TestPagesReturnsTheScansError(t *testing.T) {
	t.Parallel()
	down := errors.New("unavailable")
	_, err := agesweep.Pages(context.Background(), func(context.Context, *int, int) ([]int, error) { return nil, down }, next,
		func() int { return 1 }, func([]int, bool) bool { t.Error("visited a failed page"); return true })
	if !errors.Is(err, down) {
		t.Errorf("err = %v, want the scan's", err)
	}
}
