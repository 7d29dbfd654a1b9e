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
	// Raw is the document as stored (nil in memory stores).
	Raw map[string]any
	// Row is the document decoded; Row.Malformed says why it could not be, when it could not.
	Row Execution
	// Facts are the documents the Reads named, as Apply's transaction reads them.
	Facts Facts
}

// Peek reads the row and the documents reads names exactly as Apply's transaction reads them
// (one GetAll, the row first), but in a read-only transaction: one consistent snapshot of them
// all, as the settling transaction would see, with no lock taken on the row (a dry run must not
// slow or abort a live writer) and no write possible (the client refuses one). A read-only
// transaction is never retried. It is what a dry run and explain decide on.
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
