package retention

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var now = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

var (
	past   = now.Add(-time.Hour)
	future = now.Add(time.Hour)
	ages   = now.Add(-400 * 24 * time.Hour) // a runner's row a year old
)

// put writes documents by path.
func put(t *testing.T, fs *firestore.Client, docs map[string]map[string]any) {
	t.Helper()
	for path, d := range docs {
		if _, err := fs.Doc(path).Set(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// exists lists which of paths exist.
func exists(t *testing.T, fs *firestore.Client, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		snap, err := fs.Doc(p).Get(context.Background())
		if err == nil && snap.Exists() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func expiring(at time.Time) map[string]any { return map[string]any{ledger.ExpireField: at} }

// Every kind of bookkeeping, expired and not, beside rows the runners, workers and apps own with
// old timestamps (one even with a field named expire_at of its own): gc deletes exactly the
// expired bookkeeping, a run's receipts with it, and nothing else.
func TestGCRemovesExactlyTheExpiredBookkeeping(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	expired := map[string]map[string]any{
		"sweep_runs/old":                      {"status": "completed", ledger.ExpireField: past},
		"sweep_runs/old/syncs/a":              expiring(past),
		"sweep_runs/old/syncs/b":              expiring(past),
		"sweep_runs/old/syncs/no-expiry":      {"change": "settle"}, // an older build's: goes with its run
		"sweep_runs/live/syncs/early":         expiring(past),       // a receipt expires before its run
		"sweep_guards/wf:left":                expiring(past),
		"sweep_targets/cloud_run:p%2Fl":       expiring(past),
		"sweep_roster/current":                expiring(past),
		"sweep_roster/v1-shard":               expiring(past),
		"sweep_pauses/org-1":                  expiring(past),
		"sweep_runs/just-expired":             expiring(now.Add(-time.Microsecond)),
		"sweep_runs/just-expired/syncs/r1":    expiring(now.Add(-time.Microsecond)),
		"sweep_runs/just-expired/syncs/r2":    expiring(now.Add(-time.Microsecond)),
		"sweep_runs/just-expired/syncs/r3":    expiring(now.Add(-time.Microsecond)),
		"sweep_runs/just-expired/syncs/r4-ok": expiring(now.Add(-time.Microsecond)),
	}
	kept := map[string]map[string]any{
		"sweep_runs/live":                      {"status": "reconciling", ledger.ExpireField: future},
		"sweep_runs/live/syncs/c":              expiring(future),
		"sweep_runs/at-now":                    expiring(now), // not before now: not yet
		"sweep_runs/no-expiry":                 {"status": "completed"},
		"sweep_runs/string-expiry":             {ledger.ExpireField: "2020-01-01T00:00:00Z"},
		"sweep_guards/wf:held":                 expiring(future),
		"sweep_targets/kubernetes:c1":          expiring(future),
		"sweep_pauses/org-2":                   expiring(future),
		"runner_executions/e1":                 {"observed_at": ages, "active": false, ledger.ExpireField: ages},
		"extension_runs/x1":                    {"last_moved_at": ages, "status": "failed"},
		"extension_interlocks/t:e":             {"acquired_at": ages},
		"task_queues/q":                        {"created_at": ages},
		"task_queues/q/tasks/t1":               {"status": "done", "last_activity_at": ages},
		"task_queues/q/tasks/t1/statuses/s1":   {"created_at": ages, "prev": ""},
		"task_queues/q/tasks/t1/heartbeats/h1": {"created_at": ages, "prev": "", ledger.ExpireField: ages},
		"workspace_leases/l1":                  {"heartbeat_at": ages, "status": "released"},
		"runner_instances/i1":                  {"status": "terminated"},
		"organizations/o1":                     {"sweeps_enabled": true},
	}
	put(t, fs, expired)
	put(t, fs, kept)
	var all []string
	for p := range expired {
		all = append(all, p)
	}
	for p := range kept {
		all = append(all, p)
	}

	res, err := New(fs, Config{}).RunOnce(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for p := range kept {
		want = append(want, p)
	}
	slices.Sort(want)
	if got := exists(t, fs, all); !slices.Equal(got, want) {
		t.Errorf("left:\n%q\nwant:\n%q", got, want)
	}
	if res.Deleted() != len(expired) || res.Limited || res.OutOfBudget || res.Error != "" {
		t.Errorf("result %+v: deleted %d, want %d", res, res.Deleted(), len(expired))
	}
	got := map[string]int{}
	for _, c := range res.Counts {
		got[c.Collection] = c.Deleted
	}
	wantCounts := map[string]int{"syncs": 8, "sweep_runs": 2, "sweep_guards": 1, "sweep_targets": 1, "sweep_roster": 2, "sweep_pauses": 1}
	for k, v := range wantCounts {
		if got[k] != v {
			t.Errorf("deleted in %s: %d, want %d (%+v)", k, got[k], v, res.Counts)
		}
	}
	// Every query gc ran is on the expiry alone, of a collection it ranges over, or a run's
	// receipts.
	for _, q := range spy.Queries() {
		sh := fsspy.Shape(q)
		if sh.Collection == ledger.SyncsCollection && sh.OrderBy == "" && len(sh.Equality) == 0 {
			continue // a run's receipts, listed under it: no index needed
		}
		if !slices.Contains(Collections(), sh.Collection) || sh.OrderBy != ledger.ExpireField || len(sh.Equality) != 0 {
			t.Errorf("gc ran a query gc should not: %+v", sh)
		}
		if _, ok := fsspy.IndexFor(sh.Collection, sh.Equality, sh.OrderBy); !ok {
			t.Errorf("no declared index serves gc's query %+v", sh)
		}
	}

	// A second run finds nothing.
	res, err = New(fs, Config{}).RunOnce(context.Background(), now)
	if err != nil || res.Deleted() != 0 {
		t.Errorf("second run deleted %d (%v): %+v", res.Deleted(), err, res)
	}
}

// A dry run counts what a run would delete and deletes nothing.
func TestGCDryRunDeletesNothing(t *testing.T) {
	t.Parallel()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	docs := map[string]map[string]any{
		"sweep_runs/old":         expiring(past),
		"sweep_runs/old/syncs/a": expiring(past),
		"sweep_guards/g":         expiring(past),
		"sweep_guards/h":         expiring(future),
	}
	put(t, fs, docs)
	before := len(spy.Writes())
	res, err := New(fs, Config{DryRun: true}).RunOnce(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted() != 3 || !res.DryRun {
		t.Errorf("dry run would delete %d, want 3: %+v", res.Deleted(), res)
	}
	if w := spy.Writes()[before:]; len(w) != 0 {
		t.Errorf("a dry run wrote %v", w)
	}
}

// A run deletes at most its limit; the next run goes on from there, and runs whose receipts do
// not fit wait for a run with room.
func TestGCIsBoundedAndTheNextRunContinues(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	docs := map[string]map[string]any{}
	for i := range 25 {
		docs[fmt.Sprintf("sweep_guards/g%02d", i)] = expiring(past.Add(time.Duration(i) * time.Second))
	}
	put(t, fs, docs)
	var deleted []int
	for range 4 {
		res, err := New(fs, Config{Limit: 10, PageSize: 4, Collections: []string{ledger.GuardsCollection}}).RunOnce(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, res.Deleted())
		if want := res.Deleted() == 10; res.Limited != want {
			t.Errorf("run deleting %d says limited %v", res.Deleted(), res.Limited)
		}
	}
	if !slices.Equal(deleted, []int{10, 10, 5, 0}) {
		t.Errorf("runs deleted %v, want [10 10 5 0]", deleted)
	}

	// A run with 5 receipts, under a limit of 4: its receipts go, 4 by 4, and then it.
	put(t, fs, map[string]map[string]any{"sweep_runs/r": expiring(past)})
	for i := range 5 {
		put(t, fs, map[string]map[string]any{fmt.Sprintf("sweep_runs/r/syncs/s%d", i): {"change": "none"}})
	}
	var runs []int
	for range 3 {
		res, err := New(fs, Config{Limit: 4, Collections: []string{ledger.RunsCollection}}).RunOnce(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res.Deleted())
	}
	if !slices.Equal(runs, []int{4, 2, 0}) {
		t.Errorf("runs deleted %v, want [4 2 0]: 4 receipts, then the last and the run", runs)
	}
	if got := exists(t, fs, []string{"sweep_runs/r"}); len(got) != 0 {
		t.Errorf("the run is still there")
	}
}

// Collectors running at once delete every expired document once between them, and leave the
// rest.
func TestGCRunsConcurrentlyAndTwiceWithoutHarm(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	docs := map[string]map[string]any{}
	var paths []string
	for i := range 40 {
		p := fmt.Sprintf("sweep_targets/t%02d", i)
		docs[p], paths = expiring(past), append(paths, p)
	}
	for i := range 5 {
		p := fmt.Sprintf("sweep_runs/r%d", i)
		docs[p], paths = expiring(past), append(paths, p)
		for j := range 3 {
			q := fmt.Sprintf("%s/syncs/s%d", p, j)
			docs[q], paths = expiring(past), append(paths, q)
		}
	}
	docs["sweep_targets/live"] = expiring(future)
	put(t, fs, docs)
	var mu sync.Mutex
	deleted, raced := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			res, err := New(fs, Config{PageSize: 7}).RunOnce(context.Background(), now)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			deleted += res.Deleted()
			for _, c := range res.Counts {
				raced += c.Raced
				if c.Errors != 0 {
					t.Errorf("errors in %s: %s", c.Collection, res.Error)
				}
			}
		})
	}
	wg.Wait()
	if deleted != len(paths) {
		t.Errorf("the collectors deleted %d between them (%d raced), want %d", deleted, raced, len(paths))
	}
	if left := exists(t, fs, append(paths, "sweep_targets/live")); !slices.Equal(left, []string{"sweep_targets/live"}) {
		t.Errorf("left %v", left)
	}
	t.Logf("deleted %d, raced %d", deleted, raced)
}

// A document written between gc's read and its delete — its expiry moved into the future —
// is left alone: the delete's precondition is the update time gc read.
func TestGCLeavesADocumentWhoseExpiryMovedSinceItWasRead(t *testing.T) {
	t.Parallel()
	fs := testenv.Firestore(t)
	put(t, fs, map[string]map[string]any{"sweep_targets/moved": expiring(past), "sweep_targets/stays-expired": expiring(past)})
	c := New(fs, Config{Collections: []string{ledger.TargetsCollection}})
	c.read = func([]*firestore.DocumentSnapshot) {
		if _, err := fs.Doc("sweep_targets/moved").Set(context.Background(), expiring(future.Add(24*time.Hour))); err != nil {
			t.Error(err)
		}
	}
	res, err := c.RunOnce(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if got := exists(t, fs, []string{"sweep_targets/moved", "sweep_targets/stays-expired"}); !slices.Equal(got, []string{"sweep_targets/moved"}) {
		t.Errorf("left %v, want only the one whose expiry moved", got)
	}
	if res.Counts[0].Deleted != 1 || res.Counts[0].Raced != 1 {
		t.Errorf("counts %+v, want 1 deleted and 1 raced", res.Counts)
	}
}

func TestConfigValidationNamesTheFieldAndTheRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Limit: -1}, "limit: must be from 1 to 50000, got -1"},
		{Config{Limit: LimitMax + 1}, "limit: must be from 1 to 50000, got 50001"},
		{Config{Collections: []string{"runner_executions"}}, `collection: must be one of`},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
