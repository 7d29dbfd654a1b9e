package agesweep

import (
	"log/slog"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/storm"
)

// Guard names an age sweep's rows in its storm guard's log lines, so that each sweep's lines
// carry the same counts under its own words.
type Guard struct {
	Aged, Live string // the attributes of the verdict's counts: "idle" and "running"
	Settling   string // what the sweep does to a row, as in "abandoning past it"
}

// Held logs, as the storm guard's alert, that verdict v held the run back (why: what it held).
func (g Guard) Held(log *slog.Logger, v storm.Verdict, why string, attrs ...any) {
	log.Error(why, append([]any{alerts.StormGuardTripped.Attr(), g.Aged, v.Aged, g.Live, v.Live, "allowed", v.Allowed}, attrs...)...)
}

// Overridden logs that the operator let the run past a verdict that would have held it.
func (g Guard) Overridden(log *slog.Logger, v storm.Verdict) {
	log.Warn("storm guard overridden by the operator: "+g.Settling+" past it", g.Aged, v.Aged, g.Live, v.Live, "allowed", v.Allowed)
}
