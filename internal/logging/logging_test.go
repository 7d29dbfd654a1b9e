package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
)

func TestLinesUseCloudLoggingFieldNames(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelDebug)
	log.Warn("row settled", "runner_execution_uuid", "r1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["severity"] != "WARNING" || line["message"] != "row settled" || line["runner_execution_uuid"] != "r1" || line["time"] == nil {
		t.Errorf("line = %v", line)
	}
	if _, ok := line["level"]; ok {
		t.Error("line keeps slog's level key")
	}
}

func TestSeverities(t *testing.T) {
	for l, want := range map[slog.Level]string{slog.LevelDebug: "DEBUG", slog.LevelInfo: "INFO", slog.LevelWarn: "WARNING", slog.LevelError: "ERROR", slog.LevelError + 4: "ERROR"} {
		if got := severity(l); got != want {
			t.Errorf("severity(%v) = %s, want %s", l, got, want)
		}
	}
	if ParseLevel("warning") != slog.LevelWarn || ParseLevel("nonsense") != slog.LevelInfo || ParseLevel("DEBUG") != slog.LevelDebug {
		t.Error("ParseLevel")
	}
}

func TestTraceAttrs(t *testing.T) {
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	got := TraceAttrs(r, "proj")
	if len(got) != 3 || got[0].Value.String() != "projects/proj/traces/4bf92f3577b34da6a3ce929d0e0e4736" || got[1].Value.String() != "00f067aa0ba902b7" {
		t.Errorf("traceparent attrs = %v", got)
	}
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Cloud-Trace-Context", "105445aa7843bc8bf206b12000100000/1;o=1")
	got = TraceAttrs(r, "proj")
	if len(got) != 3 || got[0].Value.String() != "projects/proj/traces/105445aa7843bc8bf206b12000100000" || !got[2].Value.Bool() {
		t.Errorf("X-Cloud-Trace-Context attrs = %v", got)
	}
	r.Header.Set("X-Cloud-Trace-Context", "garbage")
	if got := TraceAttrs(r, "proj"); got != nil {
		t.Errorf("garbage trace header gave %v", got)
	}
	if got := TraceAttrs(r, ""); got != nil {
		t.Errorf("no project gave %v", got)
	}
}
