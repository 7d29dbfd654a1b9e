// Package retention deletes stalesweep's own bookkeeping once it has expired: the documents of
// indexes.Expiring whose ledger.ExpireField has passed. In production Firestore's TTL
// policies (terraform/firestore_ttl.tf.json) do it within a day or so of the expiry; the
// Collector does it where there are none (the emulator, a project deployed without the module)
// and on an operator's demand (`stalesweep gc`).
//
// What holds:
//   - Only bookkeeping goes: the collections it ranges over are indexes.Expiring, and a
//     document goes only when its expire_at is a timestamp before now. The rows the runners,
//     workers and apps own carry no expiry and are never read.
//   - Bounded: at most Limit deletions per run, queries of at most PageSize documents, every
//     call under CallTimeout, the whole run under Budget; what is left waits for the next run.
//   - Idempotent and safe to run concurrently: each delete carries a precondition on the update
//     time it read, so a document written since (its expiry moved) is left alone, and one
//     another collector deleted first fails the precondition and is counted as raced.
//   - A run's receipts go before the run: an expired run is deleted only once it has none.
package retention

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/indexes"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Defaults and bounds of Config.
const (
	LimitDefault       = 1000
	LimitMax           = 50_000
	PageSizeDefault    = 100
	CallTimeoutDefault = 10 * time.Second
	BudgetDefault      = 5 * time.Minute
)

// Config bounds one collection run. Zero values take the defaults.
type Config struct {
	// Limit is the most documents one run deletes (receipts included), 1 to LimitMax.
	Limit int
	// PageSize is the most documents one query reads.
	PageSize int
	// CallTimeout bounds each query and each delete.
	CallTimeout time.Duration
	// Budget bounds the whole run; it stops cleanly when spent.
	Budget time.Duration
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// Collections restricts the run to these of indexes.Expiring; empty is all.
	Collections []string
}

// WithDefaults fills the zero values.
func (c Config) WithDefaults() Config {
	c.Limit = cmp.Or(c.Limit, LimitDefault)
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.CallTimeout = cmp.Or(c.CallTimeout, CallTimeoutDefault)
	c.Budget = cmp.Or(c.Budget, BudgetDefault)
	return c
}

// Validate checks a config with its defaults applied; errors name the field and the rule.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if c.Limit < 1 || c.Limit > LimitMax {
		return fmt.Errorf("limit: must be from 1 to %d, got %d", LimitMax, c.Limit)
	}
	if c.PageSize < 1 || c.PageSize > 500 {
		return fmt.Errorf("page size: must be from 1 to 500, got %d", c.PageSize)
	}
	known := Collections()
	for _, name := range c.Collections {
		if !slices.Contains(known, name) {
			return fmt.Errorf("collection: must be one of %v, got %q", known, name)
		}
	}
	return nil
}

// Collections names the collections a run ranges over, in the order it visits them.
func Collections() []string {
	var out []string
	for _, e := range indexes.Expiring() {
		out = append(out, e.Collection)
	}
	return out
}

// Count is what a run did in one collection.
type Count struct {
	Collection string `json:"collection"`
	// Expired counts the expired documents the run read.
	Expired int `json:"expired"`
	// Deleted counts the ones it deleted (in a dry run: would have).
	Deleted int `json:"deleted"`
	// Raced counts the ones written or deleted by someone else since it read them: left alone.
	Raced int `json:"raced"`
	// Deferred counts expired runs left for a later run because their receipts did not fit in
	// the limit.
	Deferred int `json:"deferred"`
	// Errors counts deletes that failed otherwise (the first error is in Result.Error).
	Errors int `json:"errors"`
}

// Result is one run's outcome.
type Result struct {
	DryRun bool    `json:"dry_run"`
	Now    string  `json:"now"` // the time expiries were compared with
	Counts []Count `json:"collections"`
	// Limited says the limit was reached: more may be expired.
	Limited bool `json:"limited"`
	// OutOfBudget says the budget ran out first.
	OutOfBudget bool   `json:"out_of_budget"`
	Error       string `json:"error,omitempty"`
}

// Deleted is the total deleted across collections.
func (r Result) Deleted() int {
	n := 0
	for _, c := range r.Counts {
		n += c.Deleted
	}
	return n
}

// Collector deletes expired bookkeeping.
type Collector struct {
	client *firestore.Client
	cfg    Config
	// read, when set, is called with each page a query returned, before anything of it is
	// deleted: tests write to a document there, between gc's read and its delete.
	read func([]*firestore.DocumentSnapshot)
}

// New returns a collector; cfg must be valid (Config.Validate).
func New(client *firestore.Client, cfg Config) *Collector {
	return &Collector{client: client, cfg: cfg.WithDefaults()}
}

// Expired reports whether v, a document's ledger.ExpireField, is a timestamp strictly before
// now; a missing or malformed value never expires.
func Expired(v any, now time.Time) bool {
	t, ok := v.(time.Time)
	return ok && !t.IsZero() && t.Before(now)
}

// run is the state of one RunOnce.
type run struct {
	*Collector
	now   time.Time
	left  int // deletions left in the limit
	res   *Result
	first error // the first per-document failure
	// counted holds what a dry run counted as deleted: the receipts it counts in their own pass
	// are listed again under their run, still there.
	counted map[string]bool
}

// RunOnce deletes the documents expired at now, within the config's bounds. It returns an error
// when a query for expired documents fails (the Result then says what was done before);
// per-document failures are counted and passed over, and the first one is in Result.Error. A
// spent budget is not an error: Result.OutOfBudget says so.
func (c *Collector) RunOnce(ctx context.Context, now time.Time) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Budget)
	defer cancel()
	res := Result{DryRun: c.cfg.DryRun, Now: now.UTC().Format(time.RFC3339Nano)}
	r := &run{Collector: c, now: now, left: c.cfg.Limit, res: &res, counted: map[string]bool{}}
	for _, e := range indexes.Expiring() {
		if len(c.cfg.Collections) > 0 && !slices.Contains(c.cfg.Collections, e.Collection) {
			continue
		}
		res.Counts = append(res.Counts, Count{Collection: e.Collection})
	}
	var err error
	for i := range res.Counts {
		if err = r.collection(ctx, i); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		res.OutOfBudget, err = true, nil
	}
	if r.left <= 0 {
		res.Limited = true
	}
	if r.first != nil {
		res.Error = r.first.Error()
	}
	return res, err
}

func (r *run) count(coll string) *Count {
	for i := range r.res.Counts {
		if r.res.Counts[i].Collection == coll {
			return &r.res.Counts[i]
		}
	}
	// Receipts deleted with their run count under the receipts even when the run was asked for
	// alone.
	r.res.Counts = append(r.res.Counts, Count{Collection: coll})
	return &r.res.Counts[len(r.res.Counts)-1]
}

// query selects the expired documents of one collection (or group), oldest expiry first.
func (r *run) query(coll string) firestore.Query {
	var q firestore.Query
	if coll == ledger.SyncsCollection {
		q = r.client.CollectionGroup(coll).Query
	} else {
		q = r.client.Collection(coll).Query
	}
	return q.Where(ledger.ExpireField, "<", r.now).OrderBy(ledger.ExpireField, firestore.Asc)
}

// collection deletes the expired documents of the i-th counted collection, page by page, until
// none is left, the limit is reached or the budget is spent.
func (r *run) collection(ctx context.Context, i int) error {
	coll := r.res.Counts[i].Collection
	q := r.query(coll)
	var last *firestore.DocumentSnapshot
	for r.left > 0 && ctx.Err() == nil {
		n := min(r.cfg.PageSize, r.left)
		page := q.Limit(n)
		if last != nil {
			page = page.StartAfter(last)
		}
		snaps, err := r.page(ctx, page)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the budget ran out: the next run goes on where this stopped
			}
			return fmt.Errorf("find expired %s: %w", coll, err)
		}
		if r.read != nil {
			r.read(snaps)
		}
		for _, snap := range snaps {
			if r.left <= 0 || ctx.Err() != nil {
				return nil //nolint:nilerr // the limit or the budget is spent: the next run goes on
			}
			v, _ := snap.DataAt(ledger.ExpireField)
			if !Expired(v, r.now) {
				continue
			}
			r.count(coll).Expired++
			if coll == ledger.RunsCollection {
				r.deleteRun(ctx, snap)
				continue
			}
			r.delete(ctx, coll, snap)
		}
		if len(snaps) < n {
			return nil
		}
		last = snaps[len(snaps)-1]
	}
	return nil
}

func (r *run) page(ctx context.Context, q firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	return q.Documents(ctx).GetAll()
}

// deleteRun deletes an expired run's receipts, then the run once all of them are gone. A run
// whose receipts and itself do not fit in what is left of the limit loses what fits and waits
// for the next run (deferred).
func (r *run) deleteRun(ctx context.Context, snap *firestore.DocumentSnapshot) {
	receipts, err := r.page(ctx, snap.Ref.Collection(ledger.SyncsCollection).Limit(r.left))
	if err != nil {
		r.fail(ledger.RunsCollection, fmt.Errorf("list receipts of run %s: %w", snap.Ref.ID, err))
		return
	}
	fits := len(receipts) < r.left // the receipts and the run itself
	all := true
	for _, rc := range receipts {
		if r.left <= 0 || ctx.Err() != nil {
			all = false
			break
		}
		if !r.delete(ctx, ledger.SyncsCollection, rc) {
			all = false
		}
	}
	if !fits || !all || ctx.Err() != nil {
		r.count(ledger.RunsCollection).Deferred++
		return
	}
	r.delete(ctx, ledger.RunsCollection, snap)
}

// delete deletes one document if it has not been written since it was read, and reports
// whether it did (in a dry run: would).
func (r *run) delete(ctx context.Context, coll string, snap *firestore.DocumentSnapshot) bool {
	if r.cfg.DryRun && r.counted[snap.Ref.Path] {
		return true
	}
	c := r.count(coll)
	r.left--
	if r.cfg.DryRun {
		r.counted[snap.Ref.Path] = true
		c.Deleted++
		return true
	}
	call, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	_, err := snap.Ref.Delete(call, firestore.LastUpdateTime(snap.UpdateTime))
	switch code := status.Code(err); {
	case err == nil:
		c.Deleted++
		return true
	case code == codes.FailedPrecondition || code == codes.NotFound:
		c.Raced++
	case ctx.Err() != nil:
		// The budget ran out mid-call: nothing to report but OutOfBudget.
	default:
		r.fail(coll, fmt.Errorf("delete %s: %w", snap.Ref.Path, err))
	}
	return false
}

func (r *run) fail(coll string, err error) {
	r.count(coll).Errors++
	if r.first == nil {
		r.first = err
	}
}
