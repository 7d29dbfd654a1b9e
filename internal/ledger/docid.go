package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckDocID reports why id cannot name a Firestore document, or nil: it must be valid UTF-8 of
// at most 1,500 bytes, hold no "/", not be "." or "..", and not match __.*__.
func CheckDocID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("is empty")
	case len(id) > 1500:
		return fmt.Errorf("is longer than 1500 bytes")
	case !utf8.ValidString(id):
		return fmt.Errorf("is not valid UTF-8")
	case strings.Contains(id, "/"):
		return fmt.Errorf("holds a /")
	case id == "." || id == "..":
		return fmt.Errorf("is %q", id)
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return fmt.Errorf("matches __.*__, which Firestore reserves")
	}
	return nil
}
