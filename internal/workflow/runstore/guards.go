package runstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Guard is a sweep_guards document: the run that holds a scope, until when.
type Guard struct {
	WorkflowRunUUID string    `firestore:"workflow_run_uuid"`
	WorkflowType    string    `firestore:"workflow_type"`
	Scope           string    `firestore:"scope"`
	AcquiredAt      time.Time `firestore:"acquired_at"`
	ExpiresAt       time.Time `firestore:"expires_at"`
	// ExpireAt is when gc or a TTL policy may delete a guard its run never released
	// (ExpireField); not to be confused with ExpiresAt, when another run may take it over.
	ExpireAt time.Time `firestore:"expire_at,omitempty"`
	// TookOver names the run whose expired guard this one replaced, so that a start whose
	// answer was lost, read back, still closes that run's record.
	TookOver string `firestore:"took_over,omitempty"`
}

// ErrGuardHeld is returned by Store.StartRun when another live run holds the scope.
var ErrGuardHeld = errors.New("a run of this workflow on this scope is in progress")

// GuardHeldError says which run holds the scope.
type GuardHeldError struct{ Holder Guard }

func (e *GuardHeldError) Error() string {
	return fmt.Sprintf("%v: run %s, until %s", ErrGuardHeld, e.Holder.WorkflowRunUUID, e.Holder.ExpiresAt.UTC().Format(time.RFC3339))
}

func (e *GuardHeldError) Unwrap() error { return ErrGuardHeld }

// GuardStore renews and reads per-scope run guards. Store.StartRun takes a guard with its
// record, and only a write that ends the record (Store.TransitionRun, which stalesweep runs abandon uses too)
// deletes it: a run whose record could not be ended leaves its guard to expire, and the run that
// takes it over closes the record.
type GuardStore struct{ client *firestore.Client }

// NewGuardStore returns a store on client.
func NewGuardStore(client *firestore.Client) *GuardStore { return &GuardStore{client: client} }

// GuardKey is the document id of the guard of one workflow type on one scope.
func GuardKey(workflowType, scope string) string {
	return strings.NewReplacer("/", "_").Replace(workflowType + ":" + scope)
}

// takeOver decides whether g may take the guard whose current document is snap (nil or not
// existing when there is none): a *GuardHeldError while it has not expired, else the expired
// guard it replaces, if any.
func takeOver(snap *firestore.DocumentSnapshot, g Guard) (*Guard, error) {
	if snap == nil || !snap.Exists() {
		return nil, nil
	}
	var cur Guard
	if err := snap.DataTo(&cur); err != nil {
		return nil, err
	}
	if cur.ExpiresAt.After(g.AcquiredAt) {
		return nil, &GuardHeldError{Holder: cur}
	}
	return &cur, nil
}

// ErrGuardLost is returned by GuardStore.Renew when the guard no longer names the run: another
// run took it over after it expired, or an operator ended the run (stalesweep runs abandon).
var ErrGuardLost = errors.New("the run no longer holds its scope's guard")

// GuardLostError says who holds the guard now; Holder is nil when nobody does.
type GuardLostError struct{ Holder *Guard }

func (e *GuardLostError) Error() string {
	if e.Holder == nil {
		return ErrGuardLost.Error() + ": the guard is gone"
	}
	return fmt.Sprintf("%v: run %s holds it", ErrGuardLost, e.Holder.WorkflowRunUUID)
}

func (e *GuardLostError) Unwrap() error { return ErrGuardLost }

// Renew extends the lease of the guard of key to until, in a transaction, if run still holds
// it; otherwise it fails with a *GuardLostError and writes nothing. It renews a lease that has
// expired but that no other run has taken over: nobody else acted on it.
func (s *GuardStore) Renew(ctx context.Context, key, runUUID string, until time.Time) error {
	ref := s.client.Collection(ledger.GuardsCollection).Doc(key)
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			return &GuardLostError{}
		}
		if err != nil {
			return err
		}
		var cur Guard
		if err := snap.DataTo(&cur); err != nil {
			return err
		}
		if cur.WorkflowRunUUID != runUUID {
			return &GuardLostError{Holder: &cur}
		}
		return tx.Update(ref, []firestore.Update{{Path: "expires_at", Value: until}, {Path: ledger.ExpireField, Value: maxTime(cur.ExpireAt, until)}})
	}, firestore.MaxAttempts(3))
	if err != nil {
		return fmt.Errorf("renew guard %s: %w", key, err)
	}
	return nil
}

// Get reads the guard of key; nil when there is none.
func (s *GuardStore) Get(ctx context.Context, key string) (*Guard, error) {
	snap, err := s.client.Collection(ledger.GuardsCollection).Doc(key).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get guard %s: %w", key, err)
	}
	var g Guard
	if err := snap.DataTo(&g); err != nil {
		return nil, fmt.Errorf("decode guard %s: %w", key, err)
	}
	return &g, nil
}
