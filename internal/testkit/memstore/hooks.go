package memstore

import "context"

// Hooks injects faults and interleavings into a store's calls.
type Hooks struct {
	// Fail, when set, is asked at the start of every call with the method's name and the row's
	// id ("" for scans and counts): a non-nil error is the call's error, and nothing is read or
	// written.
	Fail func(op, id string) error
	// Before, when set, runs at the start of every settling call, before its row is read and
	// outside the store's lock, with the row's id.
	Before func(id string)
}

// enter starts a call: the context, then Fail.
func (h *Hooks) enter(ctx context.Context, op, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if h.Fail != nil {
		return h.Fail(op, id)
	}
	return nil
}

// settling starts a settling call: Before, then enter.
func (h *Hooks) settling(ctx context.Context, op, id string) error {
	if h.Before != nil {
		h.Before(id)
	}
	return h.enter(ctx, op, id)
}
