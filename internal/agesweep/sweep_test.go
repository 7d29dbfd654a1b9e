package agesweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestOffCommandAppliesTheFloorToEveryPathButTheCommand(t *testing.T) {
	t.Parallel()
	floor := errors.New("below the floor")
	check := agesweep.OffCommand(func(json.RawMessage) error { return floor })
	for _, trigger := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual} {
		if err := check(context.Background(), nil, trigger); !errors.Is(err, floor) {
			t.Errorf("trigger %s: %v, want the floor applied", trigger, err)
		}
	}
	if err := check(context.Background(), nil, workflow.TriggerLocal); err != nil {
		t.Errorf("the command: %v, want no floor", err)
	}
}

func TestTheClockAndDecodeStepsFailAsTheirSteps(t *testing.T) {
	t.Parallel()
	var se *workflow.StepError
	down := errors.New("unavailable")
	s := agesweep.Sweep[struct{}, struct{}]{Clock: func(context.Context) (time.Time, error) { return time.Time{}, down }}
	if _, err := s.Now(context.Background()); !errors.As(err, &se) || se.Step != "clock" || se.Reason != "clock_failed" || se.Layer != "firestore" || !errors.Is(err, down) {
		t.Errorf("clock: %v, want the clock step failed on firestore", err)
	}
	type input struct {
		Limit int `json:"limit"`
	}
	if _, err := agesweep.Decode[input](json.RawMessage(`{"limit": "x"}`)); !errors.As(err, &se) || se.Step != "decode" || se.Reason != "input_invalid" {
		t.Errorf("decode: %v, want the decode step failed, input_invalid", err)
	}
	if in, err := agesweep.Decode[input](json.RawMessage(`{"limit": 3}`)); err != nil || in.Limit != 3 {
		t.Errorf("decode = %+v %v", in, err)
	}
}

type config struct{ agesweep.Bounds }

func (c config) WithDefaults() config { c.Bounds = c.Bounds.WithDefaults(); return c }

func TestNewFillsTheConfigsDefaults(t *testing.T) {
	t.Parallel()
	s := agesweep.New("store", config{agesweep.Bounds{Concurrency: 2}}, nil)
	if s.Store != "store" || s.Config.Concurrency != 2 || s.Config.Budget != agesweep.BudgetDefault {
		t.Errorf("sweep %+v, want its store, its concurrency and the default budget", s)
	}
}
