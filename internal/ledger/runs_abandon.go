package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrRunEnded is returned by AbandonRun for a record that has already ended.
var ErrRunEnded = errors.New("the run has already ended")

// RunEndedError says how the run ended.
type RunEndedError struct{ Status string }

func (e *RunEndedError) Error() string { return fmt.Sprintf("%v: it is %s", ErrRunEnded, e.Status) }

func (e *RunEndedError) Unwrap() error { return ErrRunEnded }

// RunAbandonment is an operator's end of a run presumed dead (stalesweep runs abandon).
type RunAbandonment struct {
	At     time.Time
	Actor  string // who ended it: AbandonedBy
	Reason string // why: AbandonReason
	// GuardKey is the run's scope's guard (GuardKey); empty for a run that took none.
	GuardKey string
	// Terminal are the states a run ends in: a record in one is left alone (*RunEndedError).
	Terminal []string
	// Failure is what the record's failure says.
	Failure Failure
	// Retention decides the ended record's expiry (as notable); zero durations take the defaults.
	Retention Retention
}

// AbandonRun ends a run presumed dead, in one transaction: its record becomes failed with a's
// failure, actor and reason, and its guard, when it names the run, is deleted. It refuses, with a
// *GuardHeldError and writing nothing, a run whose guard names it and has not expired at a.At:
// that run is renewing its lease, so it is alive. A missing record is gRPC NotFound; an ended
// one a *RunEndedError.
func (s *RunStore) AbandonRun(ctx context.Context, uuid string, a RunAbandonment) error {
	ref := s.ref(uuid)
	refs := []*firestore.DocumentRef{ref}
	if a.GuardKey != "" {
		refs = append(refs, s.client.Collection(GuardsCollection).Doc(a.GuardKey))
	}
	err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		if !snaps[0].Exists() {
			return status.Errorf(codes.NotFound, "run record %s not found", uuid)
		}
		cur, _ := snaps[0].DataAt("status")
		if st, _ := cur.(string); slices.Contains(a.Terminal, st) {
			return &RunEndedError{Status: st}
		}
		var held *Guard
		if len(snaps) > 1 && snaps[1].Exists() {
			var g Guard
			if err := snaps[1].DataTo(&g); err != nil {
				return err
			}
			if g.WorkflowRunUUID == uuid {
				held = &g
			}
		}
		if held != nil && held.ExpiresAt.After(a.At) {
			return &GuardHeldError{Holder: *held}
		}
		f := a.Failure
		if err := tx.Update(ref, []firestore.Update{
			{Path: "status", Value: "failed"},
			{Path: "updated_at", Value: a.At},
			{Path: "failed_at", Value: a.At},
			{Path: "failure", Value: &f},
			{Path: "abandoned_by", Value: a.Actor},
			{Path: "abandon_reason", Value: a.Reason},
			{Path: "history", Value: firestore.ArrayUnion(StateEntry{State: "failed", At: a.At})},
			{Path: ExpireField, Value: ExpiryAt(a.At, a.Retention.WithDefaults(), true)},
		}); err != nil {
			return err
		}
		if held != nil {
			return tx.Delete(refs[1])
		}
		return nil
	}, firestore.MaxAttempts(3))
	if err != nil {
		return fmt.Errorf("abandon run %s: %w", uuid, err)
	}
	return nil
}
