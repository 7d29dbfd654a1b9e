package firestoreconn_test

import (
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
)

func TestCheckDocID(t *testing.T) {
	for _, id := range []string{"run-1", "0f8fad5b-d9cb-469f-a165-70867728950e", "_x_", "__x", "a.b", strings.Repeat("x", 1500)} {
		if err := firestoreconn.CheckDocID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "__x__", "____", strings.Repeat("x", 1501), "\xff"} {
		if firestoreconn.CheckDocID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
}
