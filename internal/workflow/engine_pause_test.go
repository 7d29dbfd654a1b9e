package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

const otherOrg = "9a8b7c6d-1111-4222-8333-444455556666"

// pausedEngine is an engine with guards and pauses on a fresh project, whose body counts its
// runs and remembers the last run's OverridePause.
type pausedEngine struct {
	eng      *workflow.Engine
	fs       *firestore.Client
	pauses   *pausestore.Store
	runs     *runstore.Store
	spy      *fsspy.Spy
	clock    *testenv.Clock
	ran      int
	override bool
}

func newPausedEngine(t *testing.T) *pausedEngine {
	t.Helper()
	spy := fsspy.New()
	fs := testenv.Firestore(t, spy.DialOptions()...)
	p := &pausedEngine{fs: fs, pauses: pausestore.New(fs), runs: runstore.New(fs), spy: spy,
		clock: testenv.NewClock(epoch)}
	p.eng = workflow.NewEngine(workflow.Options{Runs: p.runs, Guards: runstore.NewGuardStore(fs), Pauses: p.pauses, Now: p.clock.Now, Log: logging.Discard()},
		workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear,
			Body: func(ctx context.Context, run workflow.Run) (workflow.Result, error) {
				p.ran++
				p.override = run.Overrides.Pause
				return workflow.Result{}, nil
			}})
	return p
}

func (p *pausedEngine) pause(t *testing.T, scope string, until time.Time) {
	t.Helper()
	err := p.pauses.Put(context.Background(), pausestore.Pause{WorkflowType: string(contract.ExecutionSyncCloudRun), Scope: scope,
		PausedBy: "local:op@host", PausedAt: p.clock.Now(), Reason: "incident 42", Until: until})
	if err != nil {
		t.Fatal(err)
	}
}

func (p *pausedEngine) start(org string, trigger workflow.Trigger, override, dry bool) (workflow.Outcome, error) {
	return p.eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun,
		InitialData: []byte(`{"organization_uuid": "` + org + `"}`), Trigger: trigger, Overrides: workflow.Overrides{Pause: override}, DryRun: dry})
}

// refused checks that err is the pause's refusal and that the refused start wrote nothing.
func (p *pausedEngine) refused(t *testing.T, what string, err error) {
	t.Helper()
	var pe *runstore.PausedError
	switch {
	case err == nil:
		t.Fatalf("%s: started, want refused as paused", what)
	case !errors.Is(err, runstore.ErrPaused) || !errors.As(err, &pe) || contract.CodeOf(err) != contract.CodeConflict:
		t.Fatalf("%s: %v (code %s), want conflict wrapping runstore.ErrPaused", what, err, contract.CodeOf(err))
	case len(p.spy.Writes()) != 0:
		t.Fatalf("%s: a refused run wrote %+v", what, p.spy.Writes())
	}
}

func TestAPausedScopeRefusesItsRunsBeforeAnyWriteAndNotAnotherScope(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	p.pause(t, org, time.Time{})
	p.spy.Reset()
	for _, trig := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual, workflow.TriggerLocal} {
		_, err := p.start(org, trig, false, false)
		p.refused(t, string(trig), err)
	}
	if _, err := p.start(otherOrg, workflow.TriggerSchedule, false, false); err != nil {
		t.Fatalf("another organization's run was refused: %v", err)
	}
	if p.ran != 1 {
		t.Errorf("the body ran %d times, want once (the other organization)", p.ran)
	}
	if existed, err := p.pauses.Delete(context.Background(), string(contract.ExecutionSyncCloudRun), org); err != nil || !existed {
		t.Fatalf("resume: %t %v", existed, err)
	}
	out, err := p.start(org, workflow.TriggerSchedule, false, false)
	if err != nil || out.Status != workflow.StateCompleted {
		t.Fatalf("after resume: %+v %v", out, err)
	}
	rec, err := p.runs.GetRun(context.Background(), out.RunUUID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Scope != org || rec.OverridePause {
		t.Errorf("record scope %q override_pause %t, want %q and false", rec.Scope, rec.OverridePause, org)
	}
}

func TestAFleetPauseRefusesEveryScope(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	p.pause(t, "", time.Time{})
	p.spy.Reset()
	for _, o := range []string{org, otherOrg} {
		_, err := p.start(o, workflow.TriggerSchedule, false, false)
		p.refused(t, o, err)
	}
	if p.ran != 0 {
		t.Errorf("the body ran %d times under a fleet pause", p.ran)
	}
}

func TestAnEndedPauseRefusesNothing(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	p.pause(t, org, p.clock.Now().Add(time.Minute))
	p.spy.Reset()
	_, err := p.start(org, workflow.TriggerSchedule, false, false)
	p.refused(t, "before the end", err)
	p.clock.Advance(time.Minute)
	if _, err := p.start(org, workflow.TriggerSchedule, false, false); err != nil {
		t.Fatalf("at the pause's end: %v", err)
	}
}

func TestOnlyTheCommandAndTheHTTPFaceOverrideAPause(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	p.pause(t, org, time.Time{})
	if _, err := p.start(org, workflow.TriggerSchedule, true, false); contract.CodeOf(err) != contract.CodeForbidden {
		t.Fatalf("a scheduled run overriding a pause: %v, want forbidden", err)
	}
	for _, trig := range []workflow.Trigger{workflow.TriggerManual, workflow.TriggerLocal} {
		out, err := p.start(org, trig, true, false)
		if err != nil || out.Status != workflow.StateCompleted {
			t.Fatalf("%s override: %+v %v", trig, out, err)
		}
		if out.Paused == nil || out.Paused.Reason != "incident 42" || !p.override {
			t.Errorf("%s override: outcome's pause %+v, body's OverridePause %t", trig, out.Paused, p.override)
		}
		rec, err := p.runs.GetRun(context.Background(), out.RunUUID)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.OverridePause {
			t.Errorf("%s override: the record does not say the pause was overridden", trig)
		}
	}
}

func TestADryRunOfAPausedScopeRunsAndReportsThePause(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	p.pause(t, "", time.Time{})
	p.spy.Reset()
	out, err := p.start(org, workflow.TriggerLocal, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if !out.DryRun || out.Paused == nil || !out.Paused.Fleet() || p.ran != 1 {
		t.Errorf("dry run: %+v, body ran %d", out, p.ran)
	}
	if w := p.spy.Writes(); len(w) != 0 {
		t.Errorf("a dry run wrote %+v", w)
	}
}

// blindPauses is a pause check that never sees a pause: a pause taken just after it looked.
type blindPauses struct{}

func (blindPauses) Covering(context.Context, string, string, time.Time) (*pausestore.Pause, error) {
	return nil, nil
}

func TestAPauseTheStartCheckMissedIsCaughtInTheStartTransaction(t *testing.T) {
	t.Parallel()
	p := newPausedEngine(t)
	eng := workflow.NewEngine(workflow.Options{Runs: p.runs, Guards: runstore.NewGuardStore(p.fs), Pauses: blindPauses{}, Now: p.clock.Now, Log: logging.Discard()},
		workflow.Definition{Declaration: executionsync.CloudRun.Declaration, States: workflow.Linear,
			Body: func(context.Context, workflow.Run) (workflow.Result, error) { p.ran++; return workflow.Result{}, nil }})
	p.pause(t, org, time.Time{})
	p.spy.Reset()
	_, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun,
		InitialData: []byte(`{"organization_uuid": "` + org + `"}`), Trigger: workflow.TriggerSchedule})
	p.refused(t, "a pause the check missed", err)
	if p.ran != 0 {
		t.Error("the body ran")
	}
	out, err := eng.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun,
		InitialData: []byte(`{"organization_uuid": "` + org + `"}`), Trigger: workflow.TriggerLocal, Overrides: workflow.Overrides{Pause: true}})
	if err != nil || out.Status != workflow.StateCompleted {
		t.Errorf("an overriding run: %+v %v", out, err)
	}
}
