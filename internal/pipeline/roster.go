package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
)

// organizations is where one Dispatch invocation takes the enabled organizations from: the
// roster while it is fresh, else the organizations documents, kept to write as the next roster.
type organizations struct {
	d       *Dispatcher
	tick    Tick
	now     time.Time
	clocked bool
	rep     *Report
	mode    string             // "" until the first page; then "read", "build" or "list"
	roster  rosterstore.Roster // read: the roster read
	listed  []string           // build: what this invocation listed
	end     bool               // the last page was reached
	saved   bool               // build: the listed ids are written as shards
}

func (d *Dispatcher) organizations(tick Tick, now time.Time, clocked bool, rep *Report) *organizations {
	return &organizations{d: d, tick: tick, now: now, clocked: clocked, rep: rep}
}

// decide decides, on the first page, where the tick's organizations come from; only the first
// invocation of a tick that finds the roster stale, or none, builds the next.
func (o *organizations) decide(ctx context.Context) {
	d := o.d
	o.mode = "list"
	switch {
	case d.roster == nil || !o.clocked || o.tick.TickID == "":
	case o.tick.Roster == message.RosterBuild:
		o.mode = "build"
	default:
		r, ok, err := d.roster.Current(ctx)
		switch {
		case err != nil:
			d.log.Warn("the roster could not be read; the organizations are listed", "error", err.Error())
		case ok && o.now.Sub(r.BuiltAt) < d.rosterAge:
			o.mode, o.roster = "read", r
		case o.tick.After == "":
			o.mode = "build"
		}
	}
}

// page is one page of enabled organizations after `after` ("" at the end); a roster gone mid-tick falls back to listing.
func (o *organizations) page(ctx context.Context, after string) ([]string, string, error) {
	if o.mode == "" {
		o.decide(ctx)
	}
	o.rep.Roster = o.mode
	if o.mode == "read" {
		ids, next, err := o.d.roster.Page(ctx, o.roster, after)
		if !errors.Is(err, rosterstore.ErrRosterGone) {
			o.end = err == nil && next == ""
			return ids, next, err
		}
		o.d.log.Warn("the roster was replaced while this tick read it; the rest of the organizations are listed", "after", after)
		o.mode = "list"
		o.rep.Roster = o.mode
	}
	ids, next, err := o.d.enabled(ctx, after)
	if err == nil && o.mode == "build" {
		o.listed = append(o.listed, ids...)
	}
	o.end = err == nil && next == ""
	return ids, next, err
}

// save writes what a building invocation listed as shards, once, and says whether the tick goes
// on building: a failed write stops it, since the roster is a saving, never a reason to fail a tick.
func (o *organizations) save(ctx context.Context) bool {
	if o.mode != "build" {
		return false
	}
	if o.saved {
		return true
	}
	if err := o.d.roster.PutShards(ctx, o.tick.TickID, o.tick.After, o.listed); err != nil {
		o.d.log.Warn("the roster's shards could not be written; this tick stops building it", "error", err.Error())
		o.mode = "list"
		return false
	}
	o.saved = true
	return true
}

// finish makes the roster this tick built the one in use, when its listing reached the end.
func (o *organizations) finish(ctx context.Context) bool {
	if o.mode != "build" || !o.end {
		return false
	}
	last := o.tick.After
	if len(o.listed) > 0 {
		last = o.listed[len(o.listed)-1]
	}
	made, err := o.d.roster.Finish(ctx, rosterstore.Roster{Version: o.tick.TickID, BuiltAt: o.now, Last: last})
	if err != nil {
		o.d.log.Warn("the roster could not be finished; the next tick lists the organizations again", "error", err.Error())
	}
	return made
}
