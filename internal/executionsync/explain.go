package executionsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// ErrNoRow is Explain's answer for a runner execution that does not exist.
var ErrNoRow = errors.New("no such runner execution")

// Names of explain's checks, and the rules a row fails them by.
const (
	CheckOrganization = "organization_enabled"
	CheckProvider     = "provider"
	CheckActive       = "active"
	CheckObservedAt   = "observed_at"
	CheckAge          = "age"
	CheckProviderRef  = "provider_ref"

	RuleOrganizationDisabled = "organization_disabled" // the engine refuses a run of it
	RuleObservedAtInvalid    = "observed_at_invalid"   // no scan can see it (stats.invisible)
	RuleTooYoung             = "younger_than_min_age"  // the scan's horizon excludes it
	RuleExecutorNotAsked     = "executor_not_asked"    // explain.Options.NoExecutor
)

// Explain says what the next run over the row's organization, at the default min_age_seconds,
// would do to runner_executions/id, and why. It writes nothing; a missing row is ErrNoRow.
func (w *Workflow) Explain(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
	if w.syncer == nil {
		return explain.Explanation{}, errors.New("explain: this workflow was built without a syncer")
	}
	p, err := w.store.Peek(ctx, id, ledger.Reads{})
	if err != nil {
		return explain.Explanation{}, err
	}
	if !p.Found {
		return explain.Explanation{}, fmt.Errorf("%s/%s: %w", ledger.ExecutionsCollection, id, ErrNoRow)
	}
	row := p.Row
	org := row.OrganizationUUID
	if row.Malformed != "" {
		org, _ = p.Raw["organization_uuid"].(string)
	}
	if org != "" {
		// The row again with its organization, in one snapshot: what the rest is decided on.
		if p, err = w.store.Peek(ctx, id, ledger.Reads{Organization: org}); err != nil {
			return explain.Explanation{}, err
		}
		if !p.Found {
			return explain.Explanation{}, fmt.Errorf("%s/%s: %w", ledger.ExecutionsCollection, id, ErrNoRow)
		}
		row = p.Row
	}
	now := w.now()
	e := explain.Explanation{
		Collection: ledger.ExecutionsCollection, ID: id, WorkflowType: string(w.syncer.typ),
		Scope: workflow.ScopeValues{org}.Key(), Row: p.Raw, Last: last(p.Raw),
	}

	// The checks, in the order a run applies them; the first that fails decides the verdict.
	failed := ""
	check := func(name string, ok bool, rule, detail string) {
		e.Checks = append(e.Checks, explain.Check{Name: name, OK: ok, Detail: detail})
		if !ok && failed == "" {
			failed = rule
		}
	}
	enabled := p.Facts.OrganizationEnabled
	check(CheckOrganization, enabled, RuleOrganizationDisabled, map[bool]string{
		true:  fmt.Sprintf("organizations/%s has sweeps_enabled true", org),
		false: fmt.Sprintf("organizations/%s is missing or has sweeps_enabled false: a run of it is refused", org),
	}[enabled])
	provider, _ := p.Raw["provider"].(string)
	check(CheckProvider, provider == w.cfg.Provider, RefuseOtherProvider,
		fmt.Sprintf("provider %q; this workflow syncs %q rows", provider, w.cfg.Provider))
	active, _ := p.Raw["active"].(bool)
	check(CheckActive, active, WhyNotActive, fmt.Sprintf("active is %v (status %v): a scan reads active rows only", p.Raw["active"], p.Raw["status"]))
	observed, isTime := p.Raw["observed_at"].(time.Time)
	check(CheckObservedAt, isTime, RuleObservedAtInvalid, map[bool]string{
		true:  "observed_at is a timestamp: " + observed.UTC().Format(time.RFC3339),
		false: fmt.Sprintf("observed_at is %T, not a timestamp: no scan can see the row; runs count it in stats.invisible", p.Raw["observed_at"]),
	}[isTime])
	if isTime {
		age := now.Sub(observed)
		check(CheckAge, age >= time.Duration(MinAgeSecondsDefault)*time.Second, RuleTooYoung,
			fmt.Sprintf("observed %s ago; a run with min_age_seconds %d (the default) takes rows observed at least that long ago",
				age.Round(time.Second), MinAgeSecondsDefault))
	}
	refOK := row.Malformed == "" && w.exec.ValidRef(row.ProviderRef)
	refDetail := "usable by the executor"
	switch {
	case row.Malformed != "" && !isTime:
		refDetail = "the row does not decode (" + row.Malformed + "): no scan sees it, so runs count it in stats.invisible"
	case row.Malformed != "":
		refDetail = "the row does not decode (" + row.Malformed + "): a run counts it in skipped_missing_metadata_count"
	case !refOK:
		refDetail = fmt.Sprintf("provider_ref %v is missing or not usable by the executor: a run counts it in skipped_missing_metadata_count and never asks the executor", p.Raw["provider_ref"])
	}
	check(CheckProviderRef, refOK, RuleMissingMetadata, refDetail)
	e.Decided()

	var answer *explain.ExecutorAnswer
	var snapErr error
	var snap executor.Snapshot
	if refOK && !o.NoExecutor {
		s, err := w.exec.Observe(ctx, row.ProviderRef)
		snap, snapErr = s, err
		answer = &explain.ExecutorAnswer{Target: w.exec.Target(row.ProviderRef), Verdict: string(s.Verdict), Reason: s.Reason, Evidence: s.Evidence}
		if err != nil {
			answer = &explain.ExecutorAnswer{Target: w.exec.Target(row.ProviderRef), Error: status.Code(err).String() + ": " + err.Error()}
		}
		e.Executor = answer
	}

	switch {
	case failed != "":
		e.Verdict, e.Rule = VerdictSkip, failed
		e.Detail = "the next run leaves the row alone: " + e.Checks[firstFailed(e.Checks)].Detail
	case o.NoExecutor:
		e.Verdict, e.Rule = VerdictUnknown, RuleExecutorNotAsked
		e.Detail = "the executor was not asked: a run would ask it, and settle, refresh or keep the row on its answer"
	default:
		req := message.Sync{OrganizationUUID: org, RunnerExecutionUUID: id, Provider: w.cfg.Provider,
			ProviderRef: row.ProviderRef, ObservedAt: row.ObservedAt}
		r := w.syncer.settle(ctx, req, snap, snapErr, mode{dry: newDryRun()})
		pr := rowOf(r)
		e.Verdict, e.Outcome, e.Rule, e.Detail = pr.Verdict, pr.Outcome, pr.Rule, ruleDetail(pr, w.syncer.grace)
	}
	return e, nil
}

func firstFailed(cs []explain.Check) int {
	for i, c := range cs {
		if !c.OK {
			return i
		}
	}
	return 0
}

func ruleDetail(r PreviewRow, grace time.Duration) string {
	switch r.Rule {
	case ReasonExecutorTerminal:
		return "the executor reports the execution over: the row would be settled " + r.Outcome
	case ReasonLost:
		return fmt.Sprintf("the executor has not known the execution for the lost grace (%s) and its target is not blind: the row would be settled lost", grace)
	case ReasonDecidedThenGone:
		return "the executor had decided the outcome while the execution finished, and no longer knows it: the row would be settled " + r.Outcome
	case RuleExecutorRunning:
		return "the executor says it still runs: observed_at would be refreshed"
	case RuleLostGrace:
		return fmt.Sprintf("the executor does not know the execution; it stays active until it has been unknown for the lost grace (%s)", grace)
	case WhyBlindExecutor:
		return "past the lost grace, but the executor target " + r.Target + " is blind: the row stays unknown until an operator clears the target"
	case RefuseDisabled:
		return "the organization has opted out of sweeps"
	}
	if r.Error != "" {
		return "the executor call failed; nothing would be settled: " + r.Error
	}
	return ""
}

// last is what stalesweep recorded on the row (explain.Explanation.Last).
func last(raw map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"sync", "settlement", "outcome", "completed_at", "failure_reason"} {
		if v, ok := raw[k]; ok {
			out[k] = v
		}
	}
	return out
}
