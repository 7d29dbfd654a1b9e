package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// MinAgeDefault is what counts as stale for an organization's oldest row when nothing else is
// said: the execution syncs' default min_age_seconds.
const MinAgeDefault = 60 * time.Second

// concurrency bounds the reads in flight for one page.
const concurrency = 16

// LastRun is the newest run of one workflow on a scope.
type LastRun struct {
	WorkflowType    string    `json:"workflow_type"`
	WorkflowRunUUID string    `json:"workflow_run_uuid"`
	Scope           string    `json:"scope"`
	Status          string    `json:"status"`
	InitiatedAt     time.Time `json:"initiated_at"`
	FailureReason   string    `json:"failure_reason,omitempty"`
}

// StaleRow is the oldest stale row of one scope and provider: active, not observed since the
// horizon.
type StaleRow struct {
	Provider            string    `json:"provider"`
	RunnerExecutionUUID string    `json:"runner_execution_uuid"`
	ObservedAt          time.Time `json:"observed_at"`
	AgeSeconds          int64     `json:"age_seconds"`
}

// OrgView is one organization as orgs list shows it.
type OrgView struct {
	ledger.Organization
	LastRuns []LastRun `json:"last_runs"`
	// OldestStale holds, per provider that has one, the organization's oldest stale row.
	OldestStale []StaleRow `json:"oldest_stale"`
}

// OrgPage is one page of organizations, and the id to resume after ("" on the last).
type OrgPage struct {
	Organizations []OrgView `json:"organizations"`
	Next          string    `json:"next_page_token"`
}

// Reader reads the fleet's organizations, their runs and their rows.
type Reader struct {
	Orgs       *orgadmin.Store
	Runs       *RunHistory
	Executions *ledger.ExecutionStore
	// Workflows are the declared workflows: the last run of each organization-scoped one is
	// shown.
	Workflows workflow.Declarations
	// Kinds are the execution syncs whose rows are looked at for the oldest stale one.
	Kinds []executionsync.Kind
}

// Organizations returns one page of organizations after the id `after`, each with the newest
// run of every organization-scoped workflow on it and its oldest row stale at now minus minAge
// (0: MinAgeDefault). An organization costs one query of one document per workflow and per
// execution sync, served by the run list's and the scan's indexes.
func (r Reader) Organizations(ctx context.Context, after string, limit int, now time.Time, minAge time.Duration) (OrgPage, error) {
	if minAge <= 0 {
		minAge = MinAgeDefault
	}
	orgs, next, err := r.Orgs.List(ctx, after, limit)
	if err != nil {
		return OrgPage{}, err
	}
	var types []contract.WorkflowType
	for _, t := range r.Workflows.Types() {
		if k := r.Workflows[t].Scope.Kind; k == contract.ScopeOrganization || k == contract.ScopeRunnerGroup {
			types = append(types, t)
		}
	}
	page := OrgPage{Organizations: make([]OrgView, len(orgs)), Next: next}
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	parallel.ForEach(ctx, len(orgs), concurrency, func(i int) bool {
		v := OrgView{Organization: orgs[i], LastRuns: []LastRun{}, OldestStale: []StaleRow{}}
		for _, t := range types {
			run, ok, err := r.lastOfOrganization(ctx, t, orgs[i].UUID)
			if err != nil {
				fail(err)
				return false
			}
			if ok {
				v.LastRuns = append(v.LastRuns, run)
			}
		}
		for _, k := range r.Kinds {
			row, ok, err := r.OldestStale(ctx, orgs[i].UUID, k.Provider, now, minAge)
			if err != nil {
				fail(err)
				return false
			}
			if ok {
				v.OldestStale = append(v.OldestStale, row)
			}
		}
		page.Organizations[i] = v
		return false
	})
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return OrgPage{}, fmt.Errorf("read the organizations' runs and rows: %w", firstErr)
	}
	return page, nil
}

// LastRun is the newest run of workflow t on scope, "" for any (one query of one document).
func (r Reader) LastRun(ctx context.Context, t contract.WorkflowType, scope string) (LastRun, bool, error) {
	p, err := r.Runs.ListRuns(ctx, RunQuery{WorkflowType: string(t), Scope: scope, Limit: 1})
	if err != nil || len(p.Runs) == 0 {
		return LastRun{}, false, err
	}
	return lastRun(p.Runs[0]), true, nil
}

// lastOfOrganization is the newest run of workflow t on org, or on any of its runner groups
// when t is scoped to a runner group (one query of one document).
func (r Reader) lastOfOrganization(ctx context.Context, t contract.WorkflowType, org string) (LastRun, bool, error) {
	if r.Workflows[t].Scope.Kind == contract.ScopeOrganization {
		return r.LastRun(ctx, t, org)
	}
	rec, ok, err := r.Runs.LatestOfOrganization(ctx, string(t), org)
	if err != nil || !ok {
		return LastRun{}, false, err
	}
	return lastRun(rec), true, nil
}

func lastRun(rec runstore.RunRecord) LastRun {
	out := LastRun{WorkflowType: rec.WorkflowType, WorkflowRunUUID: rec.WorkflowRunUUID, Scope: rec.Scope, Status: rec.Status, InitiatedAt: rec.InitiatedAt}
	if rec.Failure != nil {
		out.FailureReason = rec.Failure.Reason
	}
	return out
}

// OldestStale is the oldest active row of org and provider not observed since now minus minAge
// (one query of one document).
func (r Reader) OldestStale(ctx context.Context, org, provider string, now time.Time, minAge time.Duration) (StaleRow, bool, error) {
	rows, cur, err := r.Executions.Scan(ctx, ledger.ScanQuery{OrganizationUUID: org, Provider: provider, Horizon: now.Add(-minAge), PageSize: 1})
	if err != nil || len(rows) == 0 || cur == nil {
		return StaleRow{}, false, err
	}
	// The cursor holds the stored observed_at, which a row that does not decode still has.
	return StaleRow{Provider: provider, RunnerExecutionUUID: rows[0].UUID, ObservedAt: cur.At,
		AgeSeconds: int64(now.Sub(cur.At) / time.Second)}, true, nil
}
