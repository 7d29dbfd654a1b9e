package ledger

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The app invocation lifecycle an app runs: the reference writer of docs/writers.md, in Go.
// stalesweep never calls it in production (it only abandons: Abandon); the tests use it.

// Start records a new running run that the app started at `at` (its own clock, kept as
// started_at); last_moved_at is Firestore's time of the write. A background run takes its
// tenant's extension interlock in the same transaction, and fails with ErrInterlockHeld while
// another run holds it.
func (s *ExtensionRunStore) Start(ctx context.Context, r ExtensionRun, at time.Time) error {
	r.Status, r.Outcome, r.StartedAt, r.LastMovedAt, r.FinishedAt, r.Settlement = ExtensionRunning, "", at, s.cfg.stampTime(), time.Time{}, nil
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(s.run(r.RunID)); err == nil {
			return ErrRunIDTaken
		} else if status.Code(err) != codes.NotFound {
			return err
		}
		if r.Background {
			lock := s.interlock(r.TenantID, r.ExtensionID)
			snap, err := tx.Get(lock)
			switch {
			case err == nil:
				holder, _ := snap.DataAt("run_id")
				return fmt.Errorf("%w: run %v", ErrInterlockHeld, holder)
			case status.Code(err) != codes.NotFound:
				return err
			}
			if err := tx.Create(lock, Interlock{RunID: r.RunID, AcquiredAt: at}); err != nil {
				return err
			}
		}
		if r.LastMovedAt.IsZero() {
			return tx.Create(s.run(r.RunID), struct {
				ExtensionRun
				LastMovedAt time.Time `firestore:"last_moved_at,serverTimestamp"`
			}{ExtensionRun: r})
		}
		return tx.Create(s.run(r.RunID), r)
	})
	if err != nil {
		return fmt.Errorf("start extension run %s: %w", r.RunID, err)
	}
	return nil
}

// Move records that a running run made progress: last_moved_at becomes Firestore's time of the
// write (the app's own clock is not asked: staleness is judged on Firestore's).
func (s *ExtensionRunStore) Move(ctx context.Context, runID string) error {
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(s.run(runID))
		if err != nil {
			return err
		}
		if st, _ := snap.DataAt("status"); st != ExtensionRunning {
			return ErrRunNotRunning
		}
		return tx.Update(s.run(runID), []firestore.Update{{Path: "last_moved_at", Value: s.cfg.stamp()}})
	})
	if err != nil {
		return fmt.Errorf("move extension run %s: %w", runID, err)
	}
	return nil
}

// Finish ends a running run with a status and outcome, and releases its interlock if, and only
// if, the interlock names this run.
func (s *ExtensionRunStore) Finish(ctx context.Context, runID, finalStatus, outcome string, at time.Time) error {
	err := s.tx(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(s.run(runID))
		if err != nil {
			return err
		}
		var r ExtensionRun
		if err := snap.DataTo(&r); err != nil {
			return err
		}
		if r.Status != ExtensionRunning {
			return ErrRunNotRunning
		}
		release, err := s.interlockNaming(tx, r, runID)
		if err != nil {
			return err
		}
		if err := tx.Update(s.run(runID), []firestore.Update{
			{Path: "status", Value: finalStatus}, {Path: "outcome", Value: outcome}, {Path: "finished_at", Value: at},
		}); err != nil {
			return err
		}
		if release != nil {
			return tx.Delete(release)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish extension run %s: %w", runID, err)
	}
	return nil
}

// interlockNaming reads, for a background run, its tenant's extension interlock and returns its
// ref when it names runID; nil when it is absent, held by another run, or the run is foreground.
func (s *ExtensionRunStore) interlockNaming(tx *firestore.Transaction, r ExtensionRun, runID string) (*firestore.DocumentRef, error) {
	if !r.Background {
		return nil, nil
	}
	lock := s.interlock(r.TenantID, r.ExtensionID)
	snap, err := tx.Get(lock)
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, nil
	case err != nil:
		return nil, err
	}
	if holder, _ := snap.DataAt("run_id"); holder != runID {
		return nil, nil
	}
	return lock, nil
}
