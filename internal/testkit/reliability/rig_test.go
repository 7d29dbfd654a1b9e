package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// epoch is the test clock's start: whole seconds, so every time it gives is one Firestore keeps
// exactly (microseconds).
var epoch = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// reporter is what the trials' helpers need of a test: a *testing.T, or a member reporting for
// one workflow from a goroutine of its own.
type reporter interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// rig is one workflow wired as internal/app wires it — engine with guards, the workflow's store
// and executor — on a Firestore connection watched by a spy and a tripwire, with a test clock
// standing in for Firestore's where the rig seeds its rows and the sweep reads its now
// (ledgertest.LocalClock); the settling transactions stamp with Firestore's own.
type rig struct {
	typ  contract.WorkflowType
	fs   *firestore.Client
	spy  *fsspy.Spy
	trip *tripwire
	// queries logs every query with the parent it runs under, for the isolation checks.
	queries *queryLog
	clock   *testenv.Clock
	engine  *workflow.Engine
	runs    *runstore.Store
	// settleField is the field every settling write of the workflow touches.
	settleField string
	// warm makes one call on every connection a run uses, so that the goroutines those
	// connections keep are running before the goroutine baseline is taken.
	warm func(t *testing.T)
	// seed writes one trial's rows, with ids of their own, and says what each may become.
	seed func(t reporter, trial int) trialRows
	// syncer, for the execution-sync workflows, syncs one row as the SyncExecution function does.
	syncer *executionsync.Syncer
}

// trialRows is what one trial seeded.
type trialRows struct {
	input map[string]any // the run's initial_data
	rows  []seededRow
}

// seededRow is one seeded row and the one complete change its workflow may make to it.
type seededRow struct {
	name string
	unit unit
	doc  string // the row's own document, whose settling writes are counted
	// change is the change a run makes; nil when the row must stay as seeded.
	change func(runUUID string) *change
	// again is the change a later run makes to the row once the first has changed it: nil when
	// the first change takes the row out of the scan (settled, refreshed).
	again   func(runUUID string) *change
	settles bool // the change is a settlement, made at most once per row
}

func newRig(t *testing.T, typ contract.WorkflowType, settleField string) *rig {
	r := &rig{typ: typ, spy: fsspy.New(), trip: &tripwire{}, queries: &queryLog{}, clock: testenv.NewClock(epoch), settleField: settleField}
	r.fs = testenv.Firestore(t, append(append(r.spy.DialOptions(), r.trip.dialOptions()...), r.queries.dialOption())...)
	r.runs = runstore.New(r.fs)
	return r
}

// use builds the engine around def.
func (r *rig) use(def workflow.Definition) {
	r.engine = workflow.NewEngine(workflow.Options{
		Runs: r.runs, Guards: runstore.NewGuardStore(r.fs), GuardTTL: 10 * time.Minute, Now: r.clock.Now, Log: logging.Discard(),
	}, def)
}

func (r *rig) start(ctx context.Context, runUUID string, input map[string]any) (workflow.Outcome, error) {
	raw, _ := json.Marshal(input)
	return r.engine.Start(ctx, workflow.Request{Type: r.typ, InitialData: raw, Trigger: workflow.TriggerLocal, Actor: "reliability", RunUUID: runUUID})
}

// read reads every row of a trial; with list, every document of the rows' subcollections too.
func (r *rig) read(t reporter, tr trialRows, list bool) []state {
	t.Helper()
	units := make([]unit, len(tr.rows))
	for i, row := range tr.rows {
		units[i] = row.unit
	}
	s, err := readUnits(context.Background(), r.fs, units, list)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

// settleWrites counts, per row document, the committed writes that touched the settle field.
func (r *rig) settleWrites() map[string]int {
	out := map[string]int{}
	for doc, n := range r.spy.WritesTouching(r.settleField) {
		out[relPath(doc)] += n
	}
	return out
}

// checkRecord says what is wrong with a run's record and its scope's guard once the run has
// returned: a run that started must have a terminal record, a run refused before starting must
// have none, and either way the guard must be gone.
func (r *rig) checkRecord(runUUID string, input map[string]any, startErr error) []string {
	ctx := context.Background()
	var problems []string
	rec, err := r.runs.GetRun(ctx, runUUID)
	switch {
	case startErr != nil && err == nil:
		problems = append(problems, fmt.Sprintf("the run was refused (%v) yet has a record in %s", startErr, rec.Status))
	case startErr != nil && status.Code(err) != codes.NotFound:
		problems = append(problems, fmt.Sprintf("the refused run's record cannot be read: %v", err))
	case startErr != nil:
	case err != nil:
		problems = append(problems, fmt.Sprintf("the run's record cannot be read: %v", err))
	case rec.Status != workflow.StateCompleted && rec.Status != workflow.StateFailed:
		problems = append(problems, fmt.Sprintf("the run's record is stuck in %q", rec.Status))
	case len(rec.History) == 0 || rec.History[len(rec.History)-1].State != rec.Status:
		problems = append(problems, fmt.Sprintf("the record's history %v does not end in its status %s", rec.History, rec.Status))
	case rec.Status == workflow.StateCompleted && rec.CompletedAt.IsZero(), rec.Status == workflow.StateFailed && (rec.FailedAt.IsZero() || rec.Failure == nil):
		problems = append(problems, fmt.Sprintf("the %s record lacks its end time or failure: %+v", rec.Status, rec))
	}
	raw, _ := json.Marshal(input)
	def, _ := r.engine.Definition(r.typ)
	key := runstore.GuardKey(string(r.typ), def.Scope.Key(raw))
	if snap, err := r.fs.Collection(ledger.GuardsCollection).Doc(key).Get(ctx); err == nil {
		problems = append(problems, fmt.Sprintf("the scope's guard %s is still held: %v", key, snap.Data()))
	} else if status.Code(err) != codes.NotFound {
		problems = append(problems, fmt.Sprintf("the guard %s cannot be read: %v", key, err))
	}
	return problems
}

// putDocs writes documents, by path, in one transaction.
func putDocs(t reporter, fs *firestore.Client, docs map[string]map[string]any) {
	t.Helper()
	err := fs.RunTransaction(context.Background(), func(_ context.Context, tx *firestore.Transaction) error {
		for path, d := range docs {
			if err := tx.Set(fs.Doc(path), d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// relPath is a document's path below the database's documents root.
func relPath(name string) string {
	if _, rel, ok := strings.Cut(name, "/documents/"); ok {
		return rel
	}
	return name
}
