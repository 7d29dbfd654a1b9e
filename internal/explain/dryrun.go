package explain

import (
	"fmt"
	"time"
)

// PreviewRowsMax is how many rows a dry run lists one by one; its counts cover every row.
const PreviewRowsMax = 50

// ReadOnlyTransaction names how a dry run reads each row: one read-only transaction per row,
// reading what the settling transaction would and asking the same decision, writing nothing.
const ReadOnlyTransaction = "read_only_transaction"

// Preview is what a dry run would have done, in a run's stats.
type Preview struct {
	// Counts counts the rows by what the run would do with them, in the workflow's own terms.
	Counts map[string]int `json:"counts"`
	// Rules counts the rows by "action/rule": which rule decided each.
	Rules map[string]int `json:"rules"`
	// Rows are the first PreviewRowsMax rows, in the order the scan read them.
	Rows                []PreviewRow `json:"rows"`
	RowsOmitted         int          `json:"rows_omitted"`
	StormGuardWouldStop bool         `json:"storm_guard_would_stop"`
	// ReadWith says how each row was re-read (ReadOnlyTransaction).
	ReadWith string `json:"read_with"`
}

// PreviewRow is what a dry run would do with one row, and the rule that decided it.
type PreviewRow struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Rule   string `json:"rule"`
	Detail string `json:"detail,omitempty"`
}

// NewPreview returns an empty preview of rows re-read with readWith.
func NewPreview(readWith string) *Preview {
	return &Preview{Counts: map[string]int{}, Rules: map[string]int{}, Rows: []PreviewRow{}, ReadWith: readWith}
}

// Add notes one row: counted always, listed while fewer than PreviewRowsMax are.
func (p *Preview) Add(id, action, rule, detail string) {
	p.Counts[action]++
	p.Rules[action+"/"+rule]++
	if len(p.Rows) == PreviewRowsMax {
		p.RowsOmitted++
		return
	}
	p.Rows = append(p.Rows, PreviewRow{ID: id, Action: action, Rule: rule, Detail: detail})
}

// Count adds n rows to an action's count without listing any (a count query's).
func (p *Preview) Count(action, rule string, n int) {
	if n > 0 {
		p.Counts[action] += n
		p.Rules[action+"/"+rule] += n
	}
}

// TimestampDetail says what a row's staleness field holds, for its "valid" check: a scan sees
// a row only when the field is a timestamp.
func TimestampDetail(v any) string {
	switch t := v.(type) {
	case nil:
		return "missing: no scan sees the row"
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprintf("%v (%T, not a timestamp): no scan sees the row", v, v)
	}
}

// DecodeDetail is a row's "decodes" check: "ok", or the decoding error (malformed).
func DecodeDetail(malformed string) string {
	if malformed == "" {
		return "ok"
	}
	return malformed
}
