package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
)

// What runners write of groups, instances and workspace leases: the reference writer of
// docs/writers.md, in Go. stalesweep never calls it in production (it only abandons leases:
// AbandonLease); the tests use it.

// PutGroup writes a runner group.
func (s *LeaseStore) PutGroup(ctx context.Context, g RunnerGroup) error {
	if _, err := s.group(g.UUID).Set(ctx, g); err != nil {
		return fmt.Errorf("put runner group %s: %w", g.UUID, err)
	}
	return nil
}

// PutInstance writes a runner instance (an instance registering, or changing status).
func (s *LeaseStore) PutInstance(ctx context.Context, in RunnerInstance) error {
	if _, err := s.instance(in.UUID).Set(ctx, in); err != nil {
		return fmt.Errorf("put runner instance %s: %w", in.UUID, err)
	}
	return nil
}

// SetInstanceStatus changes an instance's status.
func (s *LeaseStore) SetInstanceStatus(ctx context.Context, id, st string) error {
	if _, err := s.instance(id).Update(ctx, []firestore.Update{{Path: "status", Value: st}}); err != nil {
		return fmt.Errorf("set runner instance %s to %s: %w", id, st, err)
	}
	return nil
}

// Acquire records a new active lease of a workspace for an instance of the lease's group,
// acquired at `at` (the holder's clock, kept as acquired_at); heartbeat_at is Firestore's time of
// the write.
func (s *LeaseStore) Acquire(ctx context.Context, l WorkspaceLease, at time.Time) error {
	l.Status, l.AcquiredAt, l.HeartbeatAt, l.ReleasedAt, l.Settlement = LeaseActive, at, s.cfg.stampTime(), time.Time{}, nil
	var doc any = l
	if l.HeartbeatAt.IsZero() {
		doc = struct {
			WorkspaceLease
			HeartbeatAt time.Time `firestore:"heartbeat_at,serverTimestamp"`
		}{WorkspaceLease: l}
	}
	if _, err := s.lease(l.UUID).Create(ctx, doc); err != nil {
		return fmt.Errorf("acquire lease %s: %w", l.UUID, err)
	}
	return nil
}

// holderCheck reads a lease in a transaction and checks that holder holds it, active.
func (s *LeaseStore) holderCheck(tx *firestore.Transaction, leaseID, holder string) error {
	snap, err := tx.Get(s.lease(leaseID))
	if err != nil {
		return err
	}
	var l WorkspaceLease
	if err := snap.DataTo(&l); err != nil {
		return err
	}
	switch {
	case l.Status != LeaseActive:
		return ErrLeaseNotActive
	case l.HolderUUID != holder:
		return ErrNotLeaseHolder
	}
	return nil
}

// Heartbeat refreshes an active lease its holder still holds: heartbeat_at becomes Firestore's
// time of the write (the holder's own clock is not asked: staleness is judged on Firestore's).
func (s *LeaseStore) Heartbeat(ctx context.Context, leaseID, holder string) error {
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := s.holderCheck(tx, leaseID, holder); err != nil {
			return err
		}
		return tx.Update(s.lease(leaseID), []firestore.Update{{Path: "heartbeat_at", Value: s.cfg.stamp()}})
	})
	if err != nil {
		return fmt.Errorf("heartbeat lease %s: %w", leaseID, err)
	}
	return nil
}

// Release ends an active lease its holder still holds.
func (s *LeaseStore) Release(ctx context.Context, leaseID, holder string, at time.Time) error {
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := s.holderCheck(tx, leaseID, holder); err != nil {
			return err
		}
		return tx.Update(s.lease(leaseID), []firestore.Update{{Path: "status", Value: LeaseReleased}, {Path: "released_at", Value: at}})
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", leaseID, err)
	}
	return nil
}
