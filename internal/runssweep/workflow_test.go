package runssweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/stalesweep/stalesweep/internal/agesweep/sweeptest"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

type env struct {
	sweeptest.Env
	store  *ledger.ExtensionRunStore
	app    ledgertest.ExtensionRuns
	wf     *runssweep.Workflow
	tenant string
}

func newEnv(t *testing.T, wrap func(runssweep.Store) runssweep.Store) *env {
	e := &env{Env: sweeptest.NewEnv(t, epoch), tenant: "tenant-" + uuid.NewString()[:8]}
	e.store = ledger.NewExtensionRunStore(e.FS, ledger.TxConfig{})
	e.app = ledgertest.ExtensionRuns{Client: e.FS, Now: e.Clock.Now}
	e.wf = runssweep.New(sweeptest.Wrap[runssweep.Store](e.store, wrap), runssweep.Config{}, ledgertest.LocalClock(e.Clock.Now))
	e.Run(e.wf.Definition())
	return e
}

// start starts a run the way an app does, with Firestore stamping it `ago` before now.
func (e *env) start(ext string, background bool, ago time.Duration) string {
	e.T.Helper()
	id := "run-" + uuid.NewString()
	then := e.Clock.Now().Add(-ago)
	app := ledgertest.ExtensionRuns{Client: e.FS, Now: testenv.Fixed(then)}
	err := app.Start(context.Background(), ledger.ExtensionRun{RunID: id, TenantID: e.tenant, ExtensionID: ext, JobName: "sync-" + ext, Background: background}, then)
	if err != nil {
		e.T.Fatal(err)
	}
	return id
}

func (e *env) sweep(trigger workflow.Trigger, input string) (workflow.Outcome, error) {
	return e.Engine.Start(context.Background(), workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(input), Trigger: trigger})
}

func (e *env) mustSweep(input string) (runssweep.Output, runssweep.Stats) {
	e.T.Helper()
	out, err := e.sweep(workflow.TriggerLocal, input)
	if err != nil || out.Status != workflow.StateCompleted {
		e.T.Fatalf("sweep: %v %v", out.Err, err)
	}
	var o runssweep.Output
	var s runssweep.Stats
	testenv.Decode(e.T, out.Output, &o)
	testenv.Decode(e.T, out.Stats, &s)
	return o, s
}

func (e *env) run(id string) ledger.ExtensionRun {
	e.T.Helper()
	r, err := ledgertest.Value(e.store.Row(context.Background(), id))
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

func (e *env) interlock(ext string) (ledger.Interlock, bool) {
	e.T.Helper()
	l, ok, err := e.app.Interlock(context.Background(), e.tenant, ext)
	if err != nil {
		e.T.Fatal(err)
	}
	return l, ok
}

// seedResultSchema compiles the Result (200) schema printed in seed 000.
func seedResultSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := os.ReadFile("../contract/testdata/seeds/000_9dbc0efc064865a8.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	start := strings.Index(s, "Result (200)")
	end := strings.Index(s, "Errors")
	raw := strings.TrimSpace(s[start+len("Result (200)") : end])
	schema, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("the seed's Result schema does not parse: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("seed000-result.json", schema); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("seed000-result.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func TestOutputValidatesAgainstTheSeedResultSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sch := seedResultSchema(t)
	validate := func(output map[string]any) {
		t.Helper()
		b, _ := json.Marshal(output)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("output %s does not validate against seed 000's Result schema: %v", b, err)
		}
	}
	e.start("crm", true, time.Hour)
	e.start("crm", false, 2*time.Hour)
	out, err := e.sweep(workflow.TriggerLocal, `{"older_than_ms": 600000}`)
	if err != nil {
		t.Fatal(err)
	}
	validate(out.Output)
	if out.Output["swept"] != int64(2) {
		t.Errorf("swept = %v, want 2", out.Output["swept"])
	}
	empty, err := e.sweep(workflow.TriggerLocal, `{"older_than_ms": 600000}`)
	if err != nil {
		t.Fatal(err)
	}
	validate(empty.Output) // runs is [] (not null) when nothing was swept
	if b, _ := json.Marshal(empty.Output); !strings.Contains(string(b), `"runs":[]`) {
		t.Errorf("empty sweep output %s", b)
	}

	// The check can fail: an extra field breaks additionalProperties.
	bad := map[string]any{"older_than_ms": 1, "swept": 0, "runs": []any{}, "completed_at": "x"}
	b, _ := json.Marshal(bad)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if sch.Validate(inst) == nil {
		t.Error("the seed schema accepted an output with an extra field")
	}
}

func TestInputBoundsAreTheSeeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for input, field := range map[string]string{
		`{"older_than_ms": 1000, "limit": 0}`:    "limit",
		`{"older_than_ms": 1000, "limit": 1001}`: "limit",
		`{}`:                                     "older_than_ms",
		`{"limit": 5}`:                           "older_than_ms",
		`{"older_than_ms": 0}`:                   "older_than_ms",
		`{"older_than_ms": -5}`:                  "older_than_ms",
		`{"older_than_ms": 9007199254740992}`:    "older_than_ms",
		`{"older_than_ms": "1000"}`:              "older_than_ms",
		`{"older_than_ms": 1.5}`:                 "older_than_ms",
		`{"older_than_ms": 1000, "tenant": "x"}`: "tenant",
	} {
		_, err := e.sweep(workflow.TriggerLocal, input)
		if contract.CodeOf(err) != contract.CodeValidationFailed || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want validation_failed naming %s", input, err, field)
		}
	}
	if n := e.Spy.Commits(); n != 0 {
		t.Errorf("refused inputs committed %d times", n)
	}
	// The largest deadline the seed allows is accepted, and reaches back before any run.
	e.start("crm", false, 365*24*time.Hour)
	o, _ := e.mustSweep(`{"older_than_ms": 9007199254740991, "limit": 1000}`)
	if o.Swept != 0 || o.OlderThanMs != 9007199254740991 {
		t.Errorf("output = %+v", o)
	}
}

func TestTheScheduledPathHasAFloorAndTheCommandDoesNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.start("crm", false, 2*time.Second)
	for _, trig := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual} {
		_, err := e.sweep(trig, `{"older_than_ms": 1000}`)
		if contract.CodeOf(err) != contract.CodeValidationFailed || !strings.Contains(err.Error(), "older_than_ms") {
			t.Errorf("%s below the floor: err = %v, want validation_failed naming older_than_ms", trig, err)
		}
	}
	if r := e.run(id); r.Status != ledger.ExtensionRunning {
		t.Fatal("a refused scheduled sweep abandoned a run")
	}
	if out, err := e.sweep(workflow.TriggerSchedule, `{"older_than_ms": 60000}`); err != nil || out.Output["swept"] != int64(0) {
		t.Errorf("at the floor: %v %v", out.Output, err)
	}
	o, _ := e.mustSweep(`{"older_than_ms": 1}`)
	if o.Swept != 1 || e.run(id).Outcome != ledger.OutcomeAbandoned {
		t.Errorf("the command's unclamped sweep: %+v", o)
	}
}

func TestBackgroundAndForegroundRunsAndTheirInterlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	f := e.interlockFleet()
	bg, fg, lone, orphan, newer, live := f.bg, f.fg, f.lone, f.orphan, f.newer, f.live

	o, s := e.mustSweep(`{"older_than_ms": 600000}`)
	if o.Swept != 4 || s.InterlocksReleased != 1 || s.InterlocksHeldByOther != 1 {
		t.Errorf("output %+v stats %+v", o, s)
	}
	for _, id := range []string{bg, fg, lone, orphan} {
		r := e.run(id)
		if r.Status != ledger.ExtensionFailed || r.Outcome != ledger.OutcomeAbandoned || !r.FinishedAt.Equal(e.Clock.Now()) ||
			r.Settlement == nil || r.Settlement.Reason != runssweep.ReasonIdle {
			t.Errorf("run %s = %+v", id, r)
		}
	}
	if _, ok := e.interlock("crm"); ok {
		t.Error("the abandoned background run's interlock is still there")
	}
	if l, ok := e.interlock("billing"); !ok || l.RunID != newer {
		t.Errorf("the newer run's interlock was touched: %+v %t", l, ok)
	}
	if l, ok := e.interlock("search"); !ok || l.RunID != live {
		t.Errorf("the live run's interlock was touched: %+v %t", l, ok)
	}
	for _, id := range []string{newer, live} {
		if r := e.run(id); r.Status != ledger.ExtensionRunning {
			t.Errorf("live run %s was swept", id)
		}
	}
	idle := map[string]int64{}
	for _, r := range o.Runs {
		idle[r.RunID] = r.IdleMs
		if r.TenantID != e.tenant || r.JobName == "" || r.ExtensionID == "" {
			t.Errorf("output run %+v", r)
		}
	}
	if idle[bg] != time.Hour.Milliseconds() || idle[orphan] != (2*time.Hour).Milliseconds() {
		t.Errorf("idle_ms = %v", idle)
	}
}

// mover is the real store, but it lets the app move one run after the scan, before its
// transaction.
type mover struct {
	runssweep.Store
	target string
	move   func()
}

func (m *mover) Abandon(ctx context.Context, runID string, pauses []string, s ledger.Settlement, decide func(ledger.ExtensionRun) ledger.Left) (ledger.Abandonment, error) {
	if runID == m.target {
		m.move()
	}
	return m.Store.Abandon(ctx, runID, pauses, s, decide)
}

func TestARunThatMovesAfterTheScanIsNotSwept(t *testing.T) {
	t.Parallel()
	var mv *mover
	e := newEnv(t, func(s runssweep.Store) runssweep.Store { mv = &mover{Store: s}; return mv })
	target := e.start("crm", true, time.Hour)
	other := e.start("erp", true, time.Hour)
	mv.target = target
	mv.move = func() {
		if err := e.app.Move(context.Background(), target); err != nil {
			t.Error(err)
		}
	}
	o, s := e.mustSweep(`{"older_than_ms": 600000}`)
	if o.Swept != 1 || o.Runs[0].RunID != other || s.Moved != 1 {
		t.Errorf("output %+v stats %+v", o, s)
	}
	if r := e.run(target); r.Status != ledger.ExtensionRunning {
		t.Errorf("the run that moved was swept: %+v", r)
	}
	if l, ok := e.interlock("crm"); !ok || l.RunID != target {
		t.Error("the moving run lost its interlock")
	}
}

func TestEightConcurrentSweepsSweepEachRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	bw := e.FS.BulkWriter(ctx)
	stale := map[string]bool{}
	old := e.Clock.Now().Add(-time.Hour)
	for i := range 500 {
		id := fmt.Sprintf("stale-%03d", i)
		ext := fmt.Sprintf("ext-%03d", i)
		bg := i%2 == 0
		stale[id] = true
		if _, err := bw.Set(e.FS.Collection(ledger.ExtensionRunsCollection).Doc(id), ledger.ExtensionRun{TenantID: e.tenant, ExtensionID: ext,
			JobName: "j", Background: bg, Status: ledger.ExtensionRunning, StartedAt: old, LastMovedAt: old.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		if bg {
			if _, err := bw.Set(e.FS.Collection(ledger.ExtensionInterlocksCollection).Doc(ledger.InterlockID(e.tenant, ext)), ledger.Interlock{RunID: id, AcquiredAt: old}); err != nil {
				t.Fatal(err)
			}
		}
	}
	bw.End()
	var live []string
	for i := range 20 {
		live = append(live, e.start(fmt.Sprintf("live-%02d", i), true, time.Second))
	}
	e.Spy.Reset()

	const sweeps = 8
	outs := make([]runssweep.Output, sweeps, sweeps+3)
	errored := make([]int, sweeps)
	var wg sync.WaitGroup
	for i := range sweeps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, s, err := e.wf.RunOnce(ctx, fmt.Sprintf("sweep-%d", i), runssweep.Input{Limit: 1000, OlderThanMs: 600000}, true, logging.Discard()) // every run is idle: past the storm guard
			if err != nil {
				t.Error(err)
			}
			outs[i], errored[i] = o, s.Errored
		}()
	}
	wg.Wait()
	// A transaction that lost to the others until it timed out (the emulator's lock timeouts on
	// a busy machine) wrote nothing; the next sweeps, as the next ticks would, take its run. The
	// emulator can hold a timed-out transaction's lock a while, so the first of them may lose
	// too: up to three follow, until one has no transaction fail.
	for i := range 3 {
		next, stats, err := e.wf.RunOnce(ctx, fmt.Sprintf("sweep-next-%d", i), runssweep.Input{Limit: 1000, OlderThanMs: 600000}, true, logging.Discard())
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, next)
		t.Logf("errored per concurrent sweep %v; next sweep %d swept %d, errored %d", errored, i, next.Swept, stats.Errored)
		if stats.Errored == 0 {
			break
		}
	}
	total := 0
	seen := map[string]int{}
	for _, o := range outs {
		total += o.Swept
		for _, r := range o.Runs {
			seen[r.RunID]++
		}
	}
	t.Logf("8 concurrent sweeps (and the next) over 500 idle runs: swept per sweep %v, total %d", sweptCounts(outs), total)
	if total != len(seen) {
		t.Errorf("the sweeps report %d runs swept, %d distinct", total, len(seen))
	}
	for id, n := range seen {
		if n != 1 || !stale[id] {
			t.Errorf("run %s reported swept %d times (stale: %t)", id, n, stale[id])
		}
	}
	// Every stale run ends abandoned, its interlock released, by one settlement write. A commit
	// that failed at the client with a deadline or a lost answer may still have been applied
	// (firestoreconn.Ambiguous): its run is settled though the spy saw no successful commit, and
	// the sweep reports it only if it read its own settlement back. Each such run must be in
	// a commit that failed; never more than the transactions that errored go unreported.
	committed := e.Spy.WritesTouching("settlement")
	unanswered := e.Spy.FailedWritesTouching("settlement")
	settledIn := map[string]bool{}
	for doc := range unanswered {
		settledIn[fsspy.DocID(doc)] = true
	}
	for doc := range committed {
		settledIn[fsspy.DocID(doc)] = false
	}
	unreported, lost, lostBackground := 0, 0, 0
	for id := range stale {
		r := e.run(id)
		if r.Status == ledger.ExtensionRunning {
			t.Errorf("stale run %s is still running", id)
		}
		if seen[id] == 0 {
			unreported++
		}
		if lostAnswer, ok := settledIn[id]; !ok {
			t.Errorf("stale run %s is settled by no commit the spy saw, committed or failed", id)
		} else if lostAnswer {
			lost++
			if r.Background {
				lostBackground++
			}
		}
		if ext := "ext-" + id[len("stale-"):]; r.Background {
			if _, ok := e.interlock(ext); ok {
				t.Errorf("the interlock of abandoned background run %s is still held", id)
			}
		}
	}
	erroredTotal := 0
	for _, n := range errored {
		erroredTotal += n
	}
	if unreported > erroredTotal {
		t.Errorf("%d stale runs settled without a sweep reporting them, more than the %d transactions that errored", unreported, erroredTotal)
	}
	for doc, n := range committed {
		if n != 1 {
			t.Errorf("%s got %d settlement writes", doc, n)
		}
	}
	if len(committed)+lost != 500 {
		t.Errorf("%d runs got a settlement write seen committed and %d one whose commit failed at the client, want 500 in all", len(committed), lost)
	}
	t.Logf("settlements seen committed %d, in commits that failed at the client %d (of them background %d); unreported %d", len(committed), lost, lostBackground, unreported)
	for i, id := range live {
		if l, ok := e.interlock(fmt.Sprintf("live-%02d", i)); !ok || l.RunID != id {
			t.Errorf("the interlock of live run %s was released", id)
		}
	}
	deletes := 0
	for _, w := range e.Spy.Writes() {
		if w.Delete {
			deletes++
		}
	}
	if deletes+lostBackground != 250 {
		t.Errorf("%d interlocks deleted (and %d by commits that failed at the client), want the 250 of the abandoned background runs", deletes, lostBackground)
	}
}

func sweptCounts(outs []runssweep.Output) []int {
	n := make([]int, len(outs))
	for i, o := range outs {
		n[i] = o.Swept
	}
	return n
}

func TestASecondSweepSweepsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for range 5 {
		e.start("crm-"+uuid.NewString()[:4], true, time.Hour)
	}
	if o, _ := e.mustSweep(`{"older_than_ms": 600000}`); o.Swept != 5 {
		t.Fatalf("first sweep swept %d", o.Swept)
	}
	e.Spy.Reset()
	o, s := e.mustSweep(`{"older_than_ms": 600000}`)
	if o.Swept != 0 || s.Scanned != 0 {
		t.Errorf("second sweep: %+v %+v", o, s)
	}
	for _, w := range e.Spy.Writes() {
		if !strings.Contains(w.Document, "/"+ledger.RunsCollection+"/") {
			t.Errorf("second sweep wrote %s", w.Document)
		}
	}
}

func TestAfterASweepTheTenantCanStartAgainAndNotTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	dead := e.start("crm", true, time.Hour)
	startNew := func() (string, error) {
		id := "run-" + uuid.NewString()
		return id, e.app.Start(context.Background(), ledger.ExtensionRun{RunID: id, TenantID: e.tenant, ExtensionID: "crm", JobName: "j", Background: true}, e.Clock.Now())
	}
	if _, err := startNew(); !errors.Is(err, ledgertest.ErrInterlockHeld) {
		t.Fatalf("while the dead run holds the interlock: %v, want ErrInterlockHeld", err)
	}
	if o, _ := e.mustSweep(`{"older_than_ms": 600000}`); o.Swept != 1 || o.Runs[0].RunID != dead {
		t.Fatalf("sweep: %+v", o)
	}
	fresh, err := startNew()
	if err != nil {
		t.Fatalf("after the sweep: %v", err)
	}
	if _, err := startNew(); !errors.Is(err, ledgertest.ErrInterlockHeld) {
		t.Errorf("while the new live run holds it: %v, want ErrInterlockHeld", err)
	}
	if o, _ := e.mustSweep(`{"older_than_ms": 600000}`); o.Swept != 0 {
		t.Errorf("the sweep took the live run: %+v", o)
	}
	if l, ok := e.interlock("crm"); !ok || l.RunID != fresh {
		t.Errorf("interlock = %+v %t, want it to name %s", l, ok, fresh)
	}
}

func TestTheLifecycleReleasesOnlyItsOwnInterlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a := e.start("crm", true, time.Minute)
	if err := e.app.Move(ctx, a); err != nil {
		t.Fatal(err)
	}
	if r := e.run(a); !r.LastMovedAt.Equal(e.Clock.Now()) {
		t.Errorf("move did not move: %v", r.LastMovedAt)
	}
	// A foreground run of the same extension finishing must not release a's interlock.
	f := e.start("crm", false, time.Minute)
	if err := e.app.Finish(ctx, f, ledger.ExtensionSucceeded, "ok", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if l, ok := e.interlock("crm"); !ok || l.RunID != a {
		t.Errorf("a foreground finish released the interlock: %+v %t", l, ok)
	}
	if err := e.app.Finish(ctx, a, ledger.ExtensionSucceeded, "ok", e.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.interlock("crm"); ok {
		t.Error("finishing the holder did not release the interlock")
	}
	if err := e.app.Move(ctx, a); !errors.Is(err, ledgertest.ErrRunNotRunning) {
		t.Errorf("moving a finished run: %v", err)
	}
	if err := e.app.Finish(ctx, a, ledger.ExtensionFailed, "x", e.Clock.Now()); !errors.Is(err, ledgertest.ErrRunNotRunning) {
		t.Errorf("finishing twice: %v", err)
	}
}

func TestDeadline(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	if got := runssweep.Deadline(now, 60000); !got.Equal(now.Add(-time.Minute)) {
		t.Errorf("Deadline(1 min) = %v", got)
	}
	if got := runssweep.Deadline(now, 9007199254740991); got.Year() != 1 {
		t.Errorf("Deadline(2^53-1) = %v, want clamped to year 1", got)
	}
}

// Running invocations a writer left without last_moved_at, or with a string or a number there,
// are counted and sampled by every sweep, and never abandoned.
func TestInvocationsNoScanCanSeeAreCountedAndLeftAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	idle := e.start("crm", false, 2*time.Hour)
	var bad []string
	for _, v := range testenv.Unstamped {
		id := "run-" + uuid.NewString()
		testenv.PutStamped(t, e.FS, ledger.ExtensionRunsCollection+"/"+id, map[string]any{
			"tenant_id": e.tenant, "extension_id": "erp", "job_name": "j", "background": false, "status": ledger.ExtensionRunning,
		}, "last_moved_at", v)
		bad = append(bad, id)
	}
	o, s := e.mustSweep(`{"older_than_ms": 600000}`)
	if s.Invisible == nil || s.Invisible.Count != 3 || len(s.Invisible.Sample) != 3 {
		t.Errorf("stats.invisible = %+v, want the 3 invocations %v", s.Invisible, bad)
	}
	if o.Swept != 1 || e.run(idle).Outcome != ledger.OutcomeAbandoned {
		t.Errorf("the idle invocation was not abandoned: %+v", o)
	}
	for _, id := range bad {
		snap, err := e.FS.Collection(ledger.ExtensionRunsCollection).Doc(id).Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := snap.DataAt("status"); st != ledger.ExtensionRunning || snap.UpdateTime != snap.CreateTime {
			t.Errorf("invisible invocation %s changed: %v", id, snap.Data())
		}
	}
}

// Abandon's own contract, whoever calls it: an invocation whose last movement is at or after
// the deadline is not idle and is left running, even when it is the one the caller saw.
func TestAbandonLeavesAnInvocationThatIsNotIdlePastTheDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.start("crm", true, 5*time.Minute)
	seen := e.run(id)
	for _, deadline := range []time.Time{seen.LastMovedAt, seen.LastMovedAt.Add(-time.Minute)} {
		a, err := e.store.Abandon(context.Background(), id, nil, ledger.Settlement{At: e.Clock.Now(), Reason: runssweep.ReasonIdle}, runssweep.Abandonable(seen, deadline))
		if err != nil || a.Swept || a.Why != "not_idle" {
			t.Errorf("deadline %v: %+v %v, want left running: not_idle", deadline, a, err)
		}
	}
	if r := e.run(id); r.Status != ledger.ExtensionRunning {
		t.Errorf("the invocation was abandoned: %+v", r)
	}
	if _, held := e.interlock("crm"); !held {
		t.Error("its interlock was released")
	}
}

// Invocations a foreign writer got wrong (background a string), idle longer than any other, fill
// the limit's first places: the sweep names them, skips them, reads past them and abandons the
// good idle ones up to the limit.
func TestMalformedInvocationsAreSkippedAndDoNotTakeTheLimitsPlaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var bad []string
	for range 2 {
		id := e.start("erp", false, 3*time.Hour)
		if _, err := e.FS.Collection(ledger.ExtensionRunsCollection).Doc(id).Update(context.Background(), []firestore.Update{{Path: "background", Value: "yes"}}); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, ledger.ExtensionRunsCollection+"/"+id)
	}
	good := []string{e.start("crm", false, 2*time.Hour), e.start("crm", false, time.Hour)}
	o, s := e.mustSweep(`{"older_than_ms": 600000, "limit": 2}`)
	if o.Swept != 2 || e.run(good[0]).Outcome != ledger.OutcomeAbandoned || e.run(good[1]).Outcome != ledger.OutcomeAbandoned {
		t.Errorf("swept %d, want both good idle invocations: %+v", o.Swept, o)
	}
	if s.Malformed == nil || s.Malformed.Count != 2 || !slices.Equal(sorted(s.Malformed.Sample), sorted(bad)) {
		t.Errorf("stats.malformed = %+v, want %v", s.Malformed, bad)
	}
	for _, path := range bad {
		snap, err := e.FS.Doc(path).Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := snap.DataAt("status"); st != ledger.ExtensionRunning {
			t.Errorf("malformed invocation %s was written: %v", path, snap.Data())
		}
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
