package rosterstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

const rosterCurrent = "current"

// rosterShardBytes bounds the ids one shard document holds (a document holds at most 1 MiB).
const rosterShardBytes = 800 << 10

// rosterDeleteMax bounds how many shards one Finish deletes; the rest go at the next.
const rosterDeleteMax = 200

// RosterOrphanAge is how old a shard of a roster never finished (its tick was lost) is when a
// Finish deletes it. A roster is built within one tick, in minutes.
const RosterOrphanAge = 24 * time.Hour

// ErrRosterGone says a newer roster replaced the one a tick was reading: the tick lists instead.
var ErrRosterGone = errors.New("the roster was replaced while it was read")

// Roster is the roster in use.
type Roster struct {
	Version string    `firestore:"version"`
	BuiltAt time.Time `firestore:"built_at"`
	Last    string    `firestore:"last"` // the greatest id; "" when the roster is empty
	// ExpireAt is set by Finish: the next tick rebuilds a roster that is gone.
	ExpireAt time.Time `firestore:"expire_at,omitempty"`
}

type rosterShard struct {
	ShardOf   string    `firestore:"shard_of"`
	After     string    `firestore:"after"`
	Last      string    `firestore:"last"`
	IDs       []string  `firestore:"ids"`
	WrittenAt time.Time `firestore:"written_at"`
}

// Store reads and writes the roster.
type Store struct {
	client *firestore.Client
	keep   ledger.Retention
	now    func() time.Time // the clock shards' expiry is reckoned from
}

// New returns a store on client whose documents expire after keep, shards reckoned from now (nil: time.Now).
func New(client *firestore.Client, keep ledger.Retention, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{client: client, keep: keep.WithDefaults(), now: now}
}

func (s *Store) col() *firestore.CollectionRef { return s.client.Collection(ledger.RosterCollection) }

// Current reads the roster in use; false when there is none.
func (s *Store) Current(ctx context.Context) (Roster, bool, error) {
	snap, err := s.col().Doc(rosterCurrent).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Roster{}, false, nil
	}
	if err != nil {
		return Roster{}, false, fmt.Errorf("read the roster: %w", err)
	}
	var r Roster
	if err := snap.DataTo(&r); err != nil || r.Version == "" {
		return Roster{}, false, nil //nolint:nilerr // unreadable: as good as none; the next build replaces it
	}
	return r, true, nil
}

// Page returns the ids of roster r after `after` in the next shard (one read), and where to resume ("" at the end).
func (s *Store) Page(ctx context.Context, r Roster, after string) ([]string, string, error) {
	if r.Last == "" || after >= r.Last {
		return nil, "", nil
	}
	snaps, err := s.col().Where("shard_of", "==", r.Version).Where("last", ">", after).
		OrderBy("last", firestore.Asc).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return nil, "", fmt.Errorf("read the roster after %q: %w", after, err)
	}
	if len(snaps) == 0 {
		return nil, "", ErrRosterGone
	}
	var sh rosterShard
	if err := snaps[0].DataTo(&sh); err != nil {
		return nil, "", fmt.Errorf("read roster shard %s: %w", snaps[0].Ref.ID, err)
	}
	if sh.After > after {
		return nil, "", ErrRosterGone // a gap: the shard that held `after` is gone
	}
	ids := sh.IDs
	for len(ids) > 0 && ids[0] <= after {
		ids = ids[1:]
	}
	if sh.Last >= r.Last {
		return ids, "", nil
	}
	return ids, sh.Last, nil
}

// PutShards writes the ids listed after `after` (in id order) as shards of version. A shard's id
// derives from the version and where it starts, so a listing done again writes the same documents.
func (s *Store) PutShards(ctx context.Context, version, after string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	batch := s.client.Batch() //nolint:staticcheck // SA1019: writes only, no reads: one commit, which a transaction would make two round trips
	expire := ledger.ExpiryAt(s.now(), s.keep, false)
	for len(ids) > 0 {
		n, size := 0, 0
		for n < len(ids) && (n == 0 || size+len(ids[n])+16 <= rosterShardBytes) {
			size += len(ids[n]) + 16
			n++
		}
		batch.Set(s.col().Doc(shardID(version, after)), map[string]any{"shard_of": version, "after": after, "last": ids[n-1],
			"ids": ids[:n], "written_at": firestore.ServerTimestamp, ledger.ExpireField: expire})
		after, ids = ids[n-1], ids[n:]
	}
	if _, err := batch.Commit(ctx); err != nil {
		return fmt.Errorf("write the roster's shards of %s: %w", version, err)
	}
	return nil
}

func shardID(version, after string) string {
	h := sha256.Sum256([]byte(after))
	return version + "-" + hex.EncodeToString(h[:8])
}

// Finish makes r the roster in use unless the one in use was built later (the later stands), then
// deletes, up to a bound, the shards it replaced and those never finished (readers get ErrRosterGone).
func (s *Store) Finish(ctx context.Context, r Roster) (bool, error) {
	current := s.col().Doc(rosterCurrent)
	var replaced string
	made := false
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		made, replaced = false, ""
		snap, err := tx.Get(current)
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if snap != nil && snap.Exists() {
			var in Roster
			if snap.DataTo(&in) == nil {
				if in.BuiltAt.After(r.BuiltAt) {
					return nil
				}
				replaced = in.Version
			}
		}
		made = true
		r.ExpireAt = ledger.ExpiryAt(r.BuiltAt, s.keep, false)
		return tx.Set(current, r)
	})
	if err != nil {
		return false, fmt.Errorf("finish the roster %s: %w", r.Version, err)
	}
	if !made {
		return false, nil
	}
	var old []*firestore.DocumentSnapshot
	if replaced != "" && replaced != r.Version {
		snaps, err := s.col().Where("shard_of", "==", replaced).Limit(rosterDeleteMax).Documents(ctx).GetAll()
		if err != nil {
			return true, fmt.Errorf("find the shards of the replaced roster %s: %w", replaced, err)
		}
		old = append(old, snaps...)
	}
	orphans, err := s.col().Where("written_at", "<", r.BuiltAt.Add(-RosterOrphanAge)).Limit(rosterDeleteMax).Documents(ctx).GetAll()
	if err != nil {
		return true, fmt.Errorf("find the shards of rosters never finished: %w", err)
	}
	for _, snap := range orphans {
		if v, _ := snap.DataAt("shard_of"); v != r.Version {
			old = append(old, snap)
		}
	}
	if len(old) == 0 {
		return true, nil
	}
	batch := s.client.Batch() //nolint:staticcheck // SA1019: writes only, no reads: one commit, which a transaction would make two round trips
	deleted := map[string]bool{}
	for _, snap := range old {
		if !deleted[snap.Ref.ID] {
			deleted[snap.Ref.ID] = true
			batch.Delete(snap.Ref)
		}
	}
	if _, err := batch.Commit(ctx); err != nil {
		return true, fmt.Errorf("delete %d shards of replaced rosters: %w", len(deleted), err)
	}
	return true, nil
}
