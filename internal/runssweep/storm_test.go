package runssweep_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/storm"
	"github.com/stalesweep/stalesweep/internal/testkit/logsink"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// errorMessages returns the messages of the ERROR lines.
func errorMessages(lines []map[string]any) []string {
	var out []string
	for _, line := range lines {
		if line["severity"] == "ERROR" {
			out = append(out, fmt.Sprint(line["message"]))
		}
	}
	return out
}

// A scheduled sweep that would abandon more than half of the fleet's running invocations
// abandons none, fails with storm_guard and says so at ERROR; at half it goes ahead; an operator
// overrides it from the command, and nothing else can.
func TestTheStormGuardStopsMassAbandonment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	logs := &logsink.Sink{}
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(e.FS), Now: e.Clock.Now, Log: logging.New(logs, slog.LevelInfo)}, e.wf.Definition())
	start := func(trigger workflow.Trigger, override bool) (workflow.Outcome, runssweep.Stats, error) {
		out, err := engine.Start(context.Background(), workflow.Request{Type: contract.ExtensionRunsSweep, InitialData: []byte(`{"older_than_ms": 600000}`),
			Trigger: trigger, Overrides: workflow.Overrides{Storm: override}, Actor: "ops@example.com"})
		var s runssweep.Stats
		testenv.Decode(t, out.Stats, &s)
		return out, s, err
	}
	var idle []string
	for i := range 16 {
		idle = append(idle, e.start(fmt.Sprintf("idle-%02d", i), i%2 == 0, time.Hour))
	}
	for i := range 14 {
		e.start(fmt.Sprintf("live-%02d", i), true, time.Second)
	}
	e.Spy.Reset()

	// 16 idle of 30 running: more than half, and more than the minimum of 10.
	out, s, err := start(workflow.TriggerSchedule, false)
	if err != nil || out.Status != workflow.StateFailed || out.Err == nil || !errors.Is(out.Err, storm.ErrTripped) {
		t.Fatalf("run: %+v %v, want failed by the storm guard", out, err)
	}
	if s.StormGuard == nil || !s.StormGuard.Tripped || s.StormGuard.Aged != 16 || s.StormGuard.Live != 30 || s.StormGuard.Allowed != 15 {
		t.Errorf("verdict %+v, want 16 aged of 30 live, 15 allowed, tripped", s.StormGuard)
	}
	rec, err := runstore.New(e.FS).GetRun(context.Background(), out.RunUUID)
	if err != nil || rec.Failure == nil || rec.Failure.Reason != storm.Reason || rec.Failure.Step != "storm_guard" {
		t.Errorf("run record failure %+v (%v), want reason %s", rec.Failure, err, storm.Reason)
	}
	for _, w := range e.Spy.Writes() {
		if strings.Contains(w.Document, "/"+ledger.ExtensionRunsCollection+"/") || strings.Contains(w.Document, "/"+ledger.ExtensionInterlocksCollection+"/") {
			t.Errorf("a stopped sweep wrote %s", w.Document)
		}
	}
	if msgs := errorMessages(logs.Lines(t)); !containsPrefix(msgs, "storm guard") {
		t.Errorf("ERROR lines %q, want the storm guard's", msgs)
	}
	// A limit below the idle count changes nothing: the guard counts every idle run.
	out, err = engine.Start(context.Background(), workflow.Request{Type: contract.ExtensionRunsSweep,
		InitialData: []byte(`{"older_than_ms": 600000, "limit": 5}`), Trigger: workflow.TriggerSchedule})
	var limited runssweep.Stats
	testenv.Decode(t, out.Stats, &limited)
	if err != nil || out.Status != workflow.StateFailed || limited.StormGuard == nil || !limited.StormGuard.Tripped || limited.StormGuard.Aged != 16 {
		t.Errorf("a sweep limited to 5: %s %v, verdict %+v, want failed by the storm guard with 16 aged", out.Status, err, limited.StormGuard)
	}

	// Nothing but the command may override.
	for _, trigger := range []workflow.Trigger{workflow.TriggerSchedule, workflow.TriggerManual} {
		if _, _, err := start(trigger, true); contract.CodeOf(err) != contract.CodeForbidden {
			t.Errorf("an override on a %s run: %v, want forbidden", trigger, err)
		}
	}
	out, s, err = start(workflow.TriggerLocal, true)
	if err != nil || out.Status != workflow.StateCompleted || s.StormGuard == nil || !s.StormGuard.Overridden {
		t.Fatalf("the operator's override: %+v %+v %v", out, s.StormGuard, err)
	}
	if fmt.Sprint(out.Output["swept"]) != "16" {
		t.Errorf("swept %v, want the 16 idle runs", out.Output["swept"])
	}
	for _, id := range idle {
		if r := e.run(id); r.Outcome != ledger.OutcomeAbandoned {
			t.Errorf("idle run %s = %+v after the override", id, r)
		}
	}
}

func TestAtTheStormGuardsLimitTheSweepGoesAhead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for i := range 15 {
		e.start(fmt.Sprintf("idle-%02d", i), false, time.Hour)
	}
	for i := range 15 {
		e.start(fmt.Sprintf("live-%02d", i), false, time.Second)
	}
	o, s := e.mustSweep(`{"older_than_ms": 600000}`)
	if o.Swept != 15 || s.StormGuard == nil || s.StormGuard.Tripped || s.StormGuard.Aged != 15 || s.StormGuard.Live != 30 {
		t.Errorf("output %+v, verdict %+v: want 15 swept at exactly half", o, s.StormGuard)
	}
}

func containsPrefix(msgs []string, prefix string) bool {
	for _, m := range msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
