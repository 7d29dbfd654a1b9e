package agesweep_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/storm"
)

func TestGuardLinesCarryTheVerdictUnderTheSweepsWords(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	g := agesweep.Guard{Aged: "idle", Live: "running", Settling: "abandoning"}
	v := storm.Verdict{Aged: 9, Live: 10, Allowed: 3, Tripped: true}
	g.Held(log, v, "held back", "older_than_ms", 5)
	g.Overridden(log, v)
	var held, over map[string]any
	dec := json.NewDecoder(&buf)
	if err := dec.Decode(&held); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&over); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line map[string]any
		key  string
		want any
	}{
		{held, "level", "ERROR"}, {held, "msg", "held back"}, {held, alerts.Key, string(alerts.StormGuardTripped)},
		{held, "idle", 9.0}, {held, "running", 10.0}, {held, "allowed", 3.0}, {held, "older_than_ms", 5.0},
		{over, "level", "WARN"}, {over, "msg", "storm guard overridden by the operator: abandoning past it"},
		{over, "idle", 9.0}, {over, "running", 10.0}, {over, "allowed", 3.0},
	} {
		if c.line[c.key] != c.want {
			t.Errorf("%s = %v, want %v in %v", c.key, c.line[c.key], c.want, c.line)
		}
	}
	if _, ok := over[alerts.Key]; ok {
		t.Errorf("an override is not the guard's alert: %v", over)
	}
}
