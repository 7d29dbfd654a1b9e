package runssweep

import (
	"context"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Rows is what Explain needs besides the sweep's Store; *ledger.ExtensionRunStore has it.
type Rows = agesweep.Rows[ledger.ExtensionRun]

// Explain says what a sweep would do with one app invocation now, and why. Seed 000 gives
// older_than_ms no default, so the threshold is Config.ScheduledFloorMs. It writes nothing.
func (w *Workflow) Explain(ctx context.Context, rows Rows, runID string, _ explain.Options) (explain.Explanation, error) {
	e := explain.Explanation{Collection: ledger.ExtensionRunsCollection, ID: runID, WorkflowType: string(Declared.Type), Scope: "fleet"}
	row, now, err := agesweep.Explaining(ctx, &e, w.Clock, rows.Row)
	if err != nil {
		return e, err
	}
	r := row.Value
	deadline := Deadline(now, w.Config.ScheduledFloorMs)
	stamped := row.HasTimestamp(scan.Field)
	valid, decodes := scan.Checks(row.Fields, stamped, row.Malformed)
	e.Checks = []explain.Check{
		{Name: "status running", OK: row.Fields["status"] == ledger.ExtensionRunning, Detail: fmt.Sprintf("status %q; the scan reads running invocations only", row.Fields["status"])},
		valid, decodes,
		{Name: "idle past threshold", OK: stamped && r.LastMovedAt.Before(deadline), Detail: fmt.Sprintf(
			"idle %s against older_than_ms %d (the scheduled floor; deadline %s)", idle(now, r.LastMovedAt, stamped), w.Config.ScheduledFloorMs, deadline.Format(time.RFC3339))},
	}
	e.Decided()
	if r.Settlement != nil {
		e.Last = map[string]any{"settlement": r.Settlement, "outcome": r.Outcome, "finished_at": r.FinishedAt}
	}
	if scan.Skipped(&e, stamped, row.Malformed) {
		return e, nil
	}
	res, err := w.Store.PreviewAbandon(ctx, runID, nil, Abandonable(r, deadline))
	if err != nil {
		return e, err
	}
	switch {
	case res.Swept:
		e.Verdict, e.Outcome, e.Rule = "abandon", ledger.OutcomeAbandoned, ReasonIdle
		e.Detail = "marked failed with outcome abandoned"
		switch {
		case res.InterlockReleased:
			e.Detail += ", and its interlock released"
		case res.InterlockHolder != "":
			e.Detail += "; its interlock names run " + res.InterlockHolder + " and is left alone"
		}
	default:
		e.Verdict, e.Rule = "keep", string(res.Why)
	}
	return e, nil
}

var scan = agesweep.Scan{Field: "last_moved_at", Noun: "run", Settler: "sweep", Settles: "settles"}

func idle(now, last time.Time, stamped bool) string {
	if !stamped {
		return "unknown"
	}
	return now.Sub(last).Truncate(time.Millisecond).String()
}
