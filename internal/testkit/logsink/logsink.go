// Package logsink is a log destination tests read back: it keeps the JSON lines a logger
// (internal/logging) writes, from any goroutine, and decodes them. Test code only: no product
// package imports it.
package logsink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"
)

// Sink keeps every line written to it. The zero value is ready; safe for concurrent use.
type Sink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// Lines decodes every line written so far, and fails the test on a line that is not JSON.
func (s *Sink) Lines(t testing.TB) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, sc.Bytes())
		}
		out = append(out, line)
	}
	return out
}
