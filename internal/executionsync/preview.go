package executionsync

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
)

// A dry run reads by Store.Peek in one read-only transaction: one consistent snapshot, no lock
// on a row a live writer may be updating, and no write possible.

// PreviewRowsMax bounds the rows a dry run lists one by one; the counts cover them all.
const PreviewRowsMax = 200

// Preview is what a dry run would have done (Stats.Preview).
type Preview struct {
	WouldSettle  map[string]int `json:"would_settle"`  // by outcome
	WouldRefresh int            `json:"would_refresh"` // still running: observed_at would move on
	// WouldStayUnknown counts the unknown rows that would stay active (lost grace, or HeldBlind).
	WouldStayUnknown       int            `json:"would_stay_unknown"`
	HeldBlind              map[string]int `json:"held_blind,omitempty"` // by executor target
	Raced                  map[string]int `json:"raced,omitempty"`      // moved since the scan, by why
	Refused                map[string]int `json:"refused,omitempty"`    // not the run's to write, by rule
	SkippedMissingMetadata int            `json:"skipped_missing_metadata"`
	Errored                int            `json:"errored"`  // the executor call (or the read) failed: nothing would be settled
	Deferred               int            `json:"deferred"` // not attempted: executor calls stopped, or the budget spent
	Rows                   []PreviewRow   `json:"rows"`
	RowsOmitted            int            `json:"rows_omitted,omitempty"`
}

// PreviewRow is what a dry run would do to one row.
type PreviewRow struct {
	RunnerExecutionUUID string `json:"id"`
	// Verdict is settle, refresh, unknown, raced, refused, errored, deferred or skip.
	Verdict string `json:"verdict"`
	Outcome string `json:"outcome,omitempty"` // for settle: the outcome that would be written
	// Rule names what decided it.
	Rule   string `json:"rule"`
	Target string `json:"target,omitempty"` // for blind_executor: the target held
	Error  string `json:"error,omitempty"`  // for errored
}

// Verdicts of a preview row and of explain.
const (
	VerdictSettle   = "settle"
	VerdictRefresh  = "refresh"
	VerdictUnknown  = "unknown"
	VerdictRaced    = "raced"
	VerdictRefused  = "refused"
	VerdictErrored  = "errored"
	VerdictDeferred = "deferred"
	VerdictSkip     = "skip"
)

// Rules a preview row and explain name besides the settlement, race and refusal reasons.
const (
	RuleExecutorRunning = "executor_running" // the executor says it still runs
	RuleLostGrace       = "lost_grace"       // unknown to the executor, for less than the grace
	RuleMissingMetadata = "missing_metadata" // no usable provider reference
)

func rowOf(r SyncResult) PreviewRow {
	row := PreviewRow{RunnerExecutionUUID: r.RunnerExecutionUUID, Rule: r.Why}
	switch r.Outcome {
	case SyncSettled:
		row.Verdict, row.Outcome, row.Rule = VerdictSettle, r.Settled, r.Reason
	case SyncRefreshed:
		row.Verdict, row.Rule = VerdictRefresh, RuleExecutorRunning
	case SyncUnknown:
		row.Verdict, row.Target = VerdictUnknown, r.Target
		if r.Why != WhyBlindExecutor {
			row.Rule = RuleLostGrace
		}
	case SyncRaced, SyncDuplicate:
		row.Verdict = VerdictRaced
	case SyncRefused:
		row.Verdict = VerdictRefused
	case SyncErrored:
		row.Verdict, row.Rule, row.Error = VerdictErrored, r.Layer+"_"+status.Code(r.Err).String(), r.Err.Error()
	default:
		row.Verdict = VerdictDeferred
	}
	return row
}

func preview(results []SyncResult, skipped []string, skippedCount int) *Preview {
	p := &Preview{WouldSettle: map[string]int{}, Rows: []PreviewRow{}, SkippedMissingMetadata: skippedCount}
	add := func(row PreviewRow) {
		if len(p.Rows) < PreviewRowsMax {
			p.Rows = append(p.Rows, row)
		} else {
			p.RowsOmitted++
		}
	}
	bump := func(m *map[string]int, k string) {
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[k]++
	}
	for _, r := range results {
		row := rowOf(r)
		switch row.Verdict {
		case VerdictSettle:
			p.WouldSettle[row.Outcome]++
		case VerdictRefresh:
			p.WouldRefresh++
		case VerdictUnknown:
			p.WouldStayUnknown++
			if row.Rule == WhyBlindExecutor {
				bump(&p.HeldBlind, row.Target)
			}
		case VerdictRaced:
			bump(&p.Raced, row.Rule)
		case VerdictRefused:
			bump(&p.Refused, row.Rule)
		case VerdictErrored:
			p.Errored++
		default:
			p.Deferred++
		}
		add(row)
	}
	for _, id := range skipped {
		add(PreviewRow{RunnerExecutionUUID: id, Verdict: VerdictSkip, Rule: RuleMissingMetadata})
	}
	p.RowsOmitted += skippedCount - len(skipped)
	return p
}

// dryRun is one dry run's shared state: a target is assessed once while its assessment is
// fresh, as a real run's first sync judges it for the rest.
type dryRun struct {
	mu       sync.Mutex
	assessed map[string]ledger.Target
}

func newDryRun() *dryRun { return &dryRun{assessed: map[string]ledger.Target{}} }

// assess returns the target's judgment as the guard would make it at now, without recording it.
func (d *dryRun) assess(ctx context.Context, judge TargetJudge, target string, now time.Time) (ledger.Target, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.assessed[target]; ok && blindguard.Fresh(&t, now) {
		return t, nil
	}
	t, err := judge.Assess(ctx, target, now)
	if err != nil {
		return ledger.Target{}, err
	}
	d.assessed[target] = t
	return t, nil
}

// peek is a dry run's Apply: read by Store.Peek, decided by decide, and nothing written.
func (s *Syncer) peek(ctx context.Context, uuid string, reads ledger.Reads, assessed *ledger.Target, decide func(ledger.Execution, ledger.Facts) ledger.ExecutionChange) (ledger.ExecutionChange, error) {
	p, err := s.store.Peek(ctx, uuid, reads)
	switch {
	case err != nil:
		return ledger.ExecutionChange{}, err
	case !p.Found:
		return ledger.ExecutionChange{Kind: ledger.ChangeNone, Why: "row_missing"}, nil
	case p.Row.Malformed != "":
		// The settling transaction fails on a row it cannot decode: so does its preview.
		return ledger.ExecutionChange{}, fmt.Errorf("peek execution %s: %s", uuid, p.Row.Malformed)
	}
	if assessed != nil && reads.Target != "" {
		p.Facts.Target = assessed
	}
	return decide(p.Row, p.Facts), nil
}

type dryStarter struct {
	syncer      *Syncer
	concurrency int
	dry         *dryRun
}

// Start previews the syncs and returns their results in the order of reqs.
func (p *dryStarter) Start(ctx context.Context, reqs []message.Sync) []SyncResult {
	return startEach(ctx, reqs, p.concurrency, func(req message.Sync, stop func(error)) SyncResult {
		return p.syncer.sync(ctx, req, mode{callFailed: stop, dry: p.dry})
	})
}
