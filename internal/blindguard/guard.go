// Package blindguard keeps a blind executor from settling live rows: a wrong cluster mapping, a
// wrong project or region in the writers' references, a recreated cluster or a regional incident
// makes every execution of one target answer NotFound at once, and after the lost grace every
// running row of that target, in every organization, would be settled lost. The rule and the
// operator's clearance are in docs/operations.md ("The blind-executor guard").
//
// What holds, and why it is safe (docs/reliability.md, guarantee 10):
//   - The counts are of rows, fleet-wide: two aggregation queries on runner_executions by
//     sync.target, which every executor answer writes in the row's own transaction, so no
//     counter document is written per sync and there is no hot document.
//   - Every transaction that would settle a row lost reads the target's judgment (sweep_targets)
//     with the row and settles only on a fresh one that the target is not blind; a stale or
//     missing one makes the sync judge first. A judgment is written at most once per Interval
//     per target; Seen keeps healthy targets listed for one read per Interval per process.
//   - A blind event puts every row of the target into its unknown spell at once, and none can
//     be settled lost before the grace, by when the judgment counts them all.
package blindguard

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Defaults of Config.
const (
	FractionDefault = 0.5
	MinRowsDefault  = 10
	WindowDefault   = 30 * time.Minute
	// Interval is how long a judgment holds: a lost settlement needs one younger than this.
	Interval = time.Minute
)

// Config sets when a target is blind. Zero values take the defaults.
type Config struct {
	// Fraction is the share of answered rows that may be unknown before the target is blind.
	Fraction float64
	// MinRows: fewer answered rows never make a target blind (a small target's few aged-out
	// executions are not a blind executor).
	MinRows int64
	// Window is how far back answered rows count.
	Window time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Fraction = cmp.Or(c.Fraction, FractionDefault)
	c.MinRows = cmp.Or(c.MinRows, MinRowsDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	return c
}

// Blind is the rule, on the rows the target answered about (asked) and its active rows it does
// not know (unknown). It is pure.
func (c Config) Blind(asked, unknown int64) bool {
	c = c.WithDefaults()
	return asked >= c.MinRows && float64(unknown) > c.Fraction*float64(asked)
}

// Store is what the guard needs of its judgments.
type Store interface {
	Count(ctx context.Context, target string, since, clearedAt time.Time) (asked, unknown int64, err error)
	Get(ctx context.Context, target string) (ledger.Target, bool, error)
	Record(ctx context.Context, t ledger.Target) (ledger.Target, error)
}

// Guard judges targets.
type Guard struct {
	store Store
	cfg   Config
	log   *slog.Logger

	mu      sync.Mutex
	judging map[string]*sync.Mutex // one judgment of a target at a time in this process
	seen    map[string]time.Time   // when Seen last had each target judged, in this process
}

// New returns a guard.
func New(store Store, cfg Config, log *slog.Logger) *Guard {
	return &Guard{store: store, cfg: cfg.WithDefaults(), log: log, judging: map[string]*sync.Mutex{}, seen: map[string]time.Time{}}
}

// Window is Config.Window: a row held unknown must be rewritten within it to stay counted.
func (g *Guard) Window() time.Duration { return g.cfg.Window }

// Judge decides whether the target is blind at now and records the judgment, logging a blind
// one at ERROR. The syncs of one process that need it at once wait for one judgment.
func (g *Guard) Judge(ctx context.Context, target string, now time.Time) (ledger.Target, error) {
	defer g.judgingAlone(target)()
	t, stored, err := g.assess(ctx, target, now)
	if err != nil {
		return ledger.Target{}, fmt.Errorf("judge target %s: %w", target, err)
	}
	if stored {
		return t, nil
	}
	t, err = g.store.Record(ctx, ledger.Target{Target: target, Blind: t.Blind, JudgedAt: now, Asked: t.Asked, Unknown: t.Unknown})
	if err != nil {
		return ledger.Target{}, fmt.Errorf("judge target %s: %w", target, err)
	}
	if t.Blind {
		g.log.Error("blind executor: the target answers NotFound for too many of the executions it should know; no row of it is settled lost until an operator clears it (stalesweep executors clear)",
			alerts.BlindExecutor.Attr(), "target", target, "unknown", t.Unknown, "asked", t.Asked, "fraction", g.cfg.Fraction, "min_rows", g.cfg.MinRows, "blind_since", t.BlindSince)
	}
	return t, nil
}

// Seen keeps a healthy target's judgment current, so `stalesweep executors list` shows it; a
// target the rule finds blind is left to Judge, so Seen starts no blind spell earlier than Judge
// would. A failure is logged and otherwise ignored.
func (g *Guard) Seen(ctx context.Context, target string, now time.Time) {
	if target == "" {
		return
	}
	g.mu.Lock()
	last, ok := g.seen[target]
	due := !ok || now.Sub(last) >= Interval || last.After(now)
	if due {
		g.seen[target] = now
	}
	g.mu.Unlock()
	if !due {
		return
	}
	if err := g.seen1(ctx, target, now); err != nil {
		g.mu.Lock()
		delete(g.seen, target) // assess again on the next answer
		g.mu.Unlock()
		g.log.Warn("keeping an executor target's judgment current failed; executors list may show it stale", "target", target, "error", err.Error())
	}
}

// judgingAlone serializes the judgments of target in this process; call unlock to end this one.
func (g *Guard) judgingAlone(target string) (unlock func()) {
	g.mu.Lock()
	one, ok := g.judging[target]
	if !ok {
		one = &sync.Mutex{}
		g.judging[target] = one
	}
	g.mu.Unlock()
	one.Lock()
	return one.Unlock
}

func (g *Guard) seen1(ctx context.Context, target string, now time.Time) error {
	defer g.judgingAlone(target)()
	t, stored, err := g.assess(ctx, target, now)
	if err != nil || stored || t.Blind {
		return err
	}
	_, err = g.store.Record(ctx, ledger.Target{Target: target, Blind: t.Blind, JudgedAt: now, Asked: t.Asked, Unknown: t.Unknown})
	return err
}

// Assess is the judgment Judge would make of the target at now, neither written nor logged: how
// a dry run and explain see the guard.
func (g *Guard) Assess(ctx context.Context, target string, now time.Time) (ledger.Target, error) {
	t, _, err := g.assess(ctx, target, now)
	if err != nil {
		return ledger.Target{}, fmt.Errorf("assess target %s: %w", target, err)
	}
	return t, nil
}

// assess returns the stored judgment when fresh (stored true), else the rule's judgment now on
// the counts since the operator's clearance, carrying that clearance.
func (g *Guard) assess(ctx context.Context, target string, now time.Time) (t ledger.Target, stored bool, err error) {
	cur, _, err := g.store.Get(ctx, target)
	if err != nil {
		return ledger.Target{}, false, err
	}
	if Fresh(&cur, now) {
		return cur, true, nil
	}
	asked, unknown, err := g.store.Count(ctx, target, now.Add(-g.cfg.Window), cur.ClearedAt)
	if err != nil {
		return ledger.Target{}, false, err
	}
	return ledger.Target{Target: target, Blind: g.cfg.Blind(asked, unknown), JudgedAt: now, Asked: asked, Unknown: unknown,
		ClearedAt: cur.ClearedAt, ClearedBy: cur.ClearedBy}, false, nil
}

// Fresh reports whether a judgment read at now still holds.
func Fresh(t *ledger.Target, now time.Time) bool {
	return t != nil && !t.JudgedAt.IsZero() && now.Sub(t.JudgedAt) < Interval && !t.JudgedAt.After(now.Add(Interval))
}
