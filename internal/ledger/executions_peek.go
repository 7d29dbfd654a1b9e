package ledger

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"
)

// Peeked is a row and what a settling transaction reads beside it, read without writing.
type Peeked struct {
	// Found is false when the row does not exist; nothing else is set then.
	Found bool
	Raw   map[string]any
	// Row is the document decoded; Row.Malformed says why it could not be, when it could not.
	Row   Execution
	Facts Facts
}

// Peek reads what Apply's transaction reads, in a read-only transaction: one consistent snapshot,
// no lock taken on the row (a dry run must not slow or abort a live writer), no write possible.
func (s *ExecutionStore) Peek(ctx context.Context, uuid string, reads Reads) (Peeked, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	rd := s.readsOf(uuid, reads)
	var p Peeked
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		p = Peeked{}
		snaps, err := tx.GetAll(rd.refs)
		if err != nil {
			return err
		}
		if !snaps[0].Exists() {
			return nil
		}
		p.Found, p.Raw = true, snaps[0].Data()
		if p.Row, err = decodeExecution(snaps[0]); err != nil {
			p.Row = Execution{UUID: uuid, Malformed: err.Error()}
		}
		p.Facts = rd.facts(snaps)
		return nil
	}, firestore.ReadOnly)
	if err != nil {
		return Peeked{}, fmt.Errorf("peek execution %s: %w", uuid, err)
	}
	return p, nil
}
