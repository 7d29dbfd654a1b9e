package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Errors of the lease operations.
var (
	ErrLeaseNotActive = errors.New("the lease is not active")
	ErrNotLeaseHolder = errors.New("the instance does not hold the lease")
)

// Leases writes what runners write of groups, instances and workspace leases.
type Leases struct {
	Client *firestore.Client
	Now    func() time.Time // stands in for the server timestamp of heartbeat_at; nil: none
}

func (w Leases) lease(id string) *firestore.DocumentRef {
	return w.Client.Collection(ledger.WorkspaceLeasesCollection).Doc(id)
}

func (w Leases) instance(id string) *firestore.DocumentRef {
	return w.Client.Collection(ledger.RunnerInstancesCollection).Doc(id)
}

// PutGroup writes a runner group.
func (w Leases) PutGroup(ctx context.Context, g ledger.RunnerGroup) error {
	if _, err := w.Client.Collection(ledger.RunnerGroupsCollection).Doc(g.UUID).Set(ctx, g); err != nil {
		return fmt.Errorf("put runner group %s: %w", g.UUID, err)
	}
	return nil
}

// PutInstance writes a runner instance (an instance registering, or changing status).
func (w Leases) PutInstance(ctx context.Context, in ledger.RunnerInstance) error {
	if _, err := w.instance(in.UUID).Set(ctx, in); err != nil {
		return fmt.Errorf("put runner instance %s: %w", in.UUID, err)
	}
	return nil
}

// SetInstanceStatus changes an instance's status.
func (w Leases) SetInstanceStatus(ctx context.Context, id, st string) error {
	if _, err := w.instance(id).Update(ctx, []firestore.Update{{Path: "status", Value: st}}); err != nil {
		return fmt.Errorf("set runner instance %s to %s: %w", id, st, err)
	}
	return nil
}

// Acquire records a new active lease of a workspace for an instance of the lease's group,
// acquired at `at` (the holder's clock, kept as acquired_at); heartbeat_at is Firestore's time of
// the write.
func (w Leases) Acquire(ctx context.Context, l ledger.WorkspaceLease, at time.Time) error {
	l.Status, l.AcquiredAt, l.HeartbeatAt, l.ReleasedAt, l.Settlement = ledger.LeaseActive, at, time.Time{}, time.Time{}, nil
	var doc any = struct {
		ledger.WorkspaceLease
		HeartbeatAt time.Time `firestore:"heartbeat_at,serverTimestamp"`
	}{WorkspaceLease: l}
	if w.Now != nil {
		l.HeartbeatAt = w.Now().UTC()
		doc = l
	}
	if _, err := w.lease(l.UUID).Create(ctx, doc); err != nil {
		return fmt.Errorf("acquire lease %s: %w", l.UUID, err)
	}
	return nil
}

// holderCheck reads a lease in a transaction and checks that holder holds it, active.
func (w Leases) holderCheck(tx *firestore.Transaction, leaseID, holder string) error {
	snap, err := tx.Get(w.lease(leaseID))
	if err != nil {
		return err
	}
	var l ledger.WorkspaceLease
	if err := snap.DataTo(&l); err != nil {
		return err
	}
	switch {
	case l.Status != ledger.LeaseActive:
		return ErrLeaseNotActive
	case l.HolderUUID != holder:
		return ErrNotLeaseHolder
	}
	return nil
}

// Heartbeat refreshes an active lease its holder still holds: heartbeat_at becomes Firestore's
// time of the write (the holder's own clock is not asked: staleness is judged on Firestore's).
func (w Leases) Heartbeat(ctx context.Context, leaseID, holder string) error {
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := w.holderCheck(tx, leaseID, holder); err != nil {
			return err
		}
		return tx.Update(w.lease(leaseID), []firestore.Update{{Path: "heartbeat_at", Value: stamp(w.Now)}})
	})
	if err != nil {
		return fmt.Errorf("heartbeat lease %s: %w", leaseID, err)
	}
	return nil
}

// Release ends an active lease its holder still holds.
func (w Leases) Release(ctx context.Context, leaseID, holder string, at time.Time) error {
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := w.holderCheck(tx, leaseID, holder); err != nil {
			return err
		}
		return tx.Update(w.lease(leaseID), []firestore.Update{{Path: "status", Value: ledger.LeaseReleased}, {Path: "released_at", Value: at}})
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", leaseID, err)
	}
	return nil
}
