package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Errors of the run lifecycle.
var (
	ErrInterlockHeld = errors.New("a live background run of this extension holds the interlock")
	ErrRunNotRunning = errors.New("the run is not running")
	ErrRunIDTaken    = errors.New("a run with this id exists")
)

// ExtensionRuns writes the app invocation lifecycle an app runs: extension_runs and their
// extension_interlocks.
type ExtensionRuns struct {
	Client *firestore.Client
	Now    func() time.Time // stands in for the server timestamp of last_moved_at; nil: none
}

func (w ExtensionRuns) run(id string) *firestore.DocumentRef {
	return w.Client.Collection(ledger.ExtensionRunsCollection).Doc(id)
}

func (w ExtensionRuns) interlock(tenantID, extensionID string) *firestore.DocumentRef {
	return w.Client.Collection(ledger.ExtensionInterlocksCollection).Doc(ledger.InterlockID(tenantID, extensionID))
}

// Start records a new running run that the app started at `at` (its own clock, kept as
// started_at); last_moved_at is Firestore's time of the write. A background run takes its
// tenant's extension interlock in the same transaction, and fails with ErrInterlockHeld while
// another run holds it.
func (w ExtensionRuns) Start(ctx context.Context, r ledger.ExtensionRun, at time.Time) error {
	r.Status, r.Outcome, r.StartedAt, r.LastMovedAt, r.FinishedAt, r.Settlement = ledger.ExtensionRunning, "", at, time.Time{}, time.Time{}, nil
	var doc any = struct {
		ledger.ExtensionRun
		LastMovedAt time.Time `firestore:"last_moved_at,serverTimestamp"`
	}{ExtensionRun: r}
	if w.Now != nil {
		r.LastMovedAt = w.Now().UTC()
		doc = r
	}
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(w.run(r.RunID)); err == nil {
			return ErrRunIDTaken
		} else if status.Code(err) != codes.NotFound {
			return err
		}
		if r.Background {
			lock := w.interlock(r.TenantID, r.ExtensionID)
			snap, err := tx.Get(lock)
			switch {
			case err == nil:
				holder, _ := snap.DataAt("run_id")
				return fmt.Errorf("%w: run %v", ErrInterlockHeld, holder)
			case status.Code(err) != codes.NotFound:
				return err
			}
			if err := tx.Create(lock, ledger.Interlock{RunID: r.RunID, AcquiredAt: at}); err != nil {
				return err
			}
		}
		return tx.Create(w.run(r.RunID), doc)
	})
	if err != nil {
		return fmt.Errorf("start extension run %s: %w", r.RunID, err)
	}
	return nil
}

// Move records that a running run made progress: last_moved_at becomes Firestore's time of the
// write (the app's own clock is not asked: staleness is judged on Firestore's).
func (w ExtensionRuns) Move(ctx context.Context, runID string) error {
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(w.run(runID))
		if err != nil {
			return err
		}
		if st, _ := snap.DataAt("status"); st != ledger.ExtensionRunning {
			return ErrRunNotRunning
		}
		return tx.Update(w.run(runID), []firestore.Update{{Path: "last_moved_at", Value: stamp(w.Now)}})
	})
	if err != nil {
		return fmt.Errorf("move extension run %s: %w", runID, err)
	}
	return nil
}

// Finish ends a running run with a status and outcome, and releases its interlock if, and only
// if, the interlock names this run.
func (w ExtensionRuns) Finish(ctx context.Context, runID, finalStatus, outcome string, at time.Time) error {
	err := runTx(ctx, w.Client, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(w.run(runID))
		if err != nil {
			return err
		}
		var r ledger.ExtensionRun
		if err := snap.DataTo(&r); err != nil {
			return err
		}
		if r.Status != ledger.ExtensionRunning {
			return ErrRunNotRunning
		}
		release, err := w.interlockNaming(tx, r, runID)
		if err != nil {
			return err
		}
		if err := tx.Update(w.run(runID), []firestore.Update{
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
func (w ExtensionRuns) interlockNaming(tx *firestore.Transaction, r ledger.ExtensionRun, runID string) (*firestore.DocumentRef, error) {
	if !r.Background {
		return nil, nil
	}
	lock := w.interlock(r.TenantID, r.ExtensionID)
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

// Interlock reads a tenant's extension interlock, as an app about to start a background run
// would; ok is false when there is none.
func (w ExtensionRuns) Interlock(ctx context.Context, tenantID, extensionID string) (l ledger.Interlock, ok bool, err error) {
	snap, err := w.interlock(tenantID, extensionID).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return ledger.Interlock{}, false, nil
	}
	if err != nil {
		return ledger.Interlock{}, false, fmt.Errorf("get interlock %s: %w", ledger.InterlockID(tenantID, extensionID), err)
	}
	if err := snap.DataTo(&l); err != nil {
		return ledger.Interlock{}, false, err
	}
	return l, true, nil
}
