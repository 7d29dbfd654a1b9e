package agesweep

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Sweep is what an age sweep's Workflow embeds: its store, its config as New filled it, and
// the clock its runs read now from. Nothing is set on it after New.
type Sweep[S, C any] struct {
	Store  S
	Config C
	Clock  firestoreconn.Clock // Firestore's clock in production (firestoreconn.ServerClock)
}

// New is the Sweep on store, cfg with its defaults, reading now from clock.
func New[S any, C interface{ WithDefaults() C }](store S, cfg C, clock firestoreconn.Clock) Sweep[S, C] {
	return Sweep[S, C]{Store: store, Config: cfg.WithDefaults(), Clock: clock}
}

// Now is a run's clock step (doc.go).
func (s *Sweep[S, C]) Now(ctx context.Context) (time.Time, error) {
	now, err := s.Clock(ctx)
	if err != nil {
		return time.Time{}, StoreError("clock", err)
	}
	return now, nil
}

// StoreError is a run's step failing on the store: layer firestore, reason step + "_failed".
func StoreError(step string, err error) error {
	return &workflow.StepError{Step: step, Layer: "firestore", Reason: step + "_failed", Err: err}
}

// Decode reads a run's input; a failure is the run's decode step failing, input_invalid.
func Decode[In any](input json.RawMessage) (In, error) {
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return in, &workflow.StepError{Step: "decode", Layer: "workflow", Reason: "input_invalid", Err: err}
	}
	return in, nil
}

// OffCommand is a Definition's Check: scheduled, for every run not started from the command.
func OffCommand(scheduled func(json.RawMessage) error) func(context.Context, json.RawMessage, workflow.Trigger) error {
	return func(_ context.Context, input json.RawMessage, trigger workflow.Trigger) error {
		if trigger == workflow.TriggerLocal {
			return nil
		}
		return scheduled(input)
	}
}
