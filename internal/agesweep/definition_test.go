package agesweep_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestAFlooredDefinitionHoldsEveryPathButTheCommandToTheFloor(t *testing.T) {
	t.Parallel()
	type input struct {
		Limit int `json:"limit"`
	}
	f := agesweep.Floor{Field: "limit", Setting: "LIMIT_FLOOR", Why: "too few"}
	def := f.Definition(workflow.Declaration{Type: "x"}, 5, nil, agesweep.Body(func(_ context.Context, _ workflow.Run, in input) (int, string, error) {
		return in.Limit, "stats", nil
	}))
	if !reflect.DeepEqual(def.States, workflow.Atomic) || def.Type != "x" {
		t.Errorf("definition %+v, want the declaration's, atomic", def)
	}
	low := json.RawMessage(`{"limit": 4}`)
	if err := def.Scheduled(low); err == nil {
		t.Error("scheduled: a limit below the floor passed")
	}
	if err := def.Check(context.Background(), low, workflow.TriggerSchedule); err == nil {
		t.Error("check: a scheduled limit below the floor passed")
	}
	if err := def.Check(context.Background(), low, workflow.TriggerLocal); err != nil {
		t.Errorf("check, the command: %v, want no floor", err)
	}
	if err := def.Scheduled(json.RawMessage(`{"limit": 5}`)); err != nil {
		t.Errorf("scheduled at the floor: %v", err)
	}
	res, err := def.Body(context.Background(), workflow.Run{Input: json.RawMessage(`{"limit": 7}`)})
	if err != nil || res.Output != 7 || res.Stats != "stats" {
		t.Errorf("body = %+v %v, want the run's output and stats", res, err)
	}
	var se *workflow.StepError
	if _, err := def.Body(context.Background(), workflow.Run{Input: json.RawMessage(`{"limit": "x"}`)}); !errors.As(err, &se) || se.Reason != "input_invalid" {
		t.Errorf("body of a bad input: %v, want the decode step failed", err)
	}
}

func TestExplainingReadsTheRowThenTheClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	row := func(_ context.Context, id string) (ledger.Row[string], error) {
		if id != "r1" {
			return ledger.Row[string]{}, ledger.ErrNoRow
		}
		return ledger.Row[string]{Fields: map[string]any{"id": id}, Value: id}, nil
	}
	e := explain.Explanation{ID: "r1"}
	r, at, err := agesweep.Explaining(context.Background(), &e, ledger.LocalClock(func() time.Time { return now }), row)
	if err != nil || r.Value != "r1" || !at.Equal(now) || e.Row["id"] != "r1" {
		t.Errorf("explaining = %+v %v %v, row noted %v", r, at, err, e.Row)
	}
	missing := explain.Explanation{ID: "r2"}
	if _, _, err := agesweep.Explaining(context.Background(), &missing, ledger.LocalClock(func() time.Time { return now }), row); !errors.Is(err, ledger.ErrNoRow) {
		t.Errorf("a missing row: %v, want the read's error", err)
	}
	down := errors.New("unavailable")
	if _, _, err := agesweep.Explaining(context.Background(), &e, func(context.Context) (time.Time, error) { return time.Time{}, down }, row); !errors.Is(err, down) {
		t.Errorf("a clock that failed: %v, want its error", err)
	}
}

func TestAScanSkipsARowItCannotSeeOrDecode(t *testing.T) {
	t.Parallel()
	scan := agesweep.Scan{Field: "last_activity_at", Noun: "task", Settler: "sweep", Settles: "reclaims"}
	for _, c := range []struct {
		stamped             bool
		malformed           string
		skipped             bool
		verdict, rule, said string
	}{
		{false, "", true, "skip", "invisible", "last_activity_at is missing or not a timestamp: no scan sees the task, so no sweep reclaims it (counted in stats.invisible)"},
		{false, "x", true, "skip", "invisible", "last_activity_at is missing or not a timestamp: no scan sees the task, so no sweep reclaims it (counted in stats.invisible)"},
		{true, "x", true, "skip", "malformed", "the task does not decode: the sweep skips it (counted in stats.malformed)"},
		{true, "", false, "", "", ""},
	} {
		var e explain.Explanation
		if got := scan.Skipped(&e, c.stamped, c.malformed); got != c.skipped || e.Verdict != c.verdict || e.Rule != c.rule || e.Detail != c.said {
			t.Errorf("stamped %v, malformed %q: skipped %v, %s/%s %q", c.stamped, c.malformed, got, e.Verdict, e.Rule, e.Detail)
		}
	}
	valid, decodes := scan.Checks(map[string]any{"last_activity_at": "yesterday"}, false, "x")
	if valid.Name != "last_activity_at valid" || valid.OK || decodes.Name != "decodes" || decodes.OK {
		t.Errorf("checks %+v %+v, want both failed", valid, decodes)
	}
}
