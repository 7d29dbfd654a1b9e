// Package logging builds the slog loggers stalesweep writes with: one JSON object a line, in the
// field names Cloud Logging reads from a function's stdout (severity, message, time,
// logging.googleapis.com/trace), every other attribute a queryable jsonPayload field.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
)

// Field names Cloud Logging gives meaning to.
const (
	TraceKey  = "logging.googleapis.com/trace"
	SpanKey   = "logging.googleapis.com/spanId"
	SampleKey = "logging.googleapis.com/trace_sampled"
)

// New returns a logger writing JSON lines to w at level and above.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       level,
		ReplaceAttr: replace,
	}))
}

// Discard is a logger that writes nothing, for tests that do not read logs.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func replace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = "message"
	case slog.LevelKey:
		a.Key = "severity"
		a.Value = slog.StringValue(severity(a.Value.Any().(slog.Level)))
	}
	return a
}

// severity maps slog levels onto Cloud Logging's LogSeverity names.
func severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}

// ParseLevel reads a level name (debug, info, warn/warning, error); anything else is info.
func ParseLevel(s string) slog.Level {
	l, _ := ParseLevelStrict(s)
	return l
}

// ParseLevelStrict reads a level name as ParseLevel does (empty is info), refusing any other.
func ParseLevelStrict(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return slog.LevelInfo, fmt.Errorf("want debug, info, warn or error")
	}
}

var (
	cloudTrace  = regexp.MustCompile(`^([0-9a-fA-F]{32})(?:/([0-9]+))?(?:;o=([01]))?$`)
	traceParent = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)
)

// TraceAttrs returns the trace attributes of a request, from its traceparent or
// X-Cloud-Trace-Context header, for project; none without a project or a well-formed trace.
func TraceAttrs(r *http.Request, project string) []slog.Attr {
	if project == "" || r == nil {
		return nil
	}
	if m := traceParent.FindStringSubmatch(r.Header.Get("traceparent")); m != nil {
		return []slog.Attr{
			slog.String(TraceKey, "projects/"+project+"/traces/"+m[1]),
			slog.String(SpanKey, m[2]),
			slog.Bool(SampleKey, m[3] == "01"),
		}
	}
	if m := cloudTrace.FindStringSubmatch(r.Header.Get("X-Cloud-Trace-Context")); m != nil {
		attrs := []slog.Attr{slog.String(TraceKey, "projects/"+project+"/traces/"+m[1])}
		if m[2] != "" {
			attrs = append(attrs, slog.String(SpanKey, m[2]))
		}
		if m[3] != "" {
			attrs = append(attrs, slog.Bool(SampleKey, m[3] == "1"))
		}
		return attrs
	}
	return nil
}
