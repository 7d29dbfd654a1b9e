package agesweep

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Floor is the least value a threshold of a sweep's input may take on every path but the
// command: below it a scheduled run would settle rows whose writers are alive.
type Floor struct {
	Field   string // the input's field, "older_than_ms"
	Setting string // the setting that lowers the floor, named in the refusal
	Why     string // what a smaller value would do
}

// Definition is the sweep of Declaration d as the engine runs it: atomic, its input held to
// least on every path but the command, probe asked of each scope.
func (f Floor) Definition(d workflow.Declaration, least int64, probe func(ctx context.Context, input json.RawMessage, now time.Time) (bool, error),
	body workflow.Body) workflow.Definition {
	scheduled := func(input json.RawMessage) error {
		return contract.AtLeast(input, f.Field, least, f.Setting, f.Why)
	}
	return workflow.Definition{Declaration: d, States: workflow.Atomic, Check: OffCommand(scheduled), Scheduled: scheduled, Probe: workflow.ProbeEach(probe), Body: body}
}

// Body is a Definition's Body: the run's input decoded and handed to run.
func Body[In, Out, Stats any](run func(ctx context.Context, r workflow.Run, in In) (Out, Stats, error)) workflow.Body {
	return func(ctx context.Context, r workflow.Run) (workflow.Result, error) {
		in, err := Decode[In](r.Input)
		if err != nil {
			return workflow.Result{}, err
		}
		out, stats, err := run(ctx, r, in)
		return workflow.Result{Output: out, Stats: stats}, err
	}
}
