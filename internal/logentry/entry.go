// Package logentry reads the Cloud Logging LogEntry (JSON) a log sink publishes to Pub/Sub, and
// declares the sink filters that choose them. An executor's completion entry is a hint naming an
// execution, never the truth: whoever acts on it asks the executor first.
//
// A Filter is written once, as data: its String is the sink's filter (generated into Terraform)
// and its Match is the same test applied to a decoded entry, so that what the sink lets through
// and what the decoder accepts cannot drift apart.
package logentry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Entry is one decoded LogEntry: its JSON as a tree, read by field path.
type Entry struct {
	tree map[string]any
}

// Decode reads a LogEntry from the JSON Cloud Logging writes to Pub/Sub.
func Decode(data []byte) (Entry, error) {
	var tree map[string]any
	if err := json.Unmarshal(data, &tree); err != nil {
		return Entry{}, fmt.Errorf("decode log entry: %w", err)
	}
	if tree == nil {
		return Entry{}, errors.New("decode log entry: not a JSON object")
	}
	return Entry{tree: tree}, nil
}

// Get returns the string at a dotted path ("resource.labels.job_name"), or "" when there is
// none. A key that holds a dot itself ("run.googleapis.com/execution_name" under labels) is
// found as one key: each step takes the longest key that is there.
func (e Entry) Get(path string) string {
	s, _ := e.value(path).(string)
	return s
}

// Object returns the object at path, or nil.
func (e Entry) Object(path string) map[string]any {
	m, _ := e.value(path).(map[string]any)
	return m
}

func (e Entry) value(path string) any {
	var v any = e.tree
	for path != "" {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		key, found := "", false
		for i := len(path); i > 0; i = strings.LastIndex(path[:i], ".") {
			if _, ok := m[path[:i]]; ok {
				key, found = path[:i], true
				break
			}
		}
		if !found {
			return nil
		}
		v, path = m[key], strings.TrimPrefix(path[len(key):], ".")
	}
	return v
}

// InsertID is the entry's unique id within its log (Cloud Logging de-duplicates on it).
func (e Entry) InsertID() string { return e.Get("insertId") }

// LogID is the log the entry is in, unescaped: "cloudaudit.googleapis.com/system_event".
func (e Entry) LogID() string {
	_, id, ok := strings.Cut(e.Get("logName"), "/logs/")
	if !ok {
		return ""
	}
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}
