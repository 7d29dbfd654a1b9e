package ledgertest

import (
	"fmt"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Value is a row a store's Row read back, as a test checks it: the decoded document, or an
// error when the read failed or the document does not decode.
func Value[T any](r ledger.Row[T], err error) (T, error) {
	if err == nil && r.Malformed != "" {
		err = fmt.Errorf("decode: %s", r.Malformed)
	}
	return r.Value, err
}
