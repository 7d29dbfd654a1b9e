package executionsync

import (
	"cmp"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	observed := now.Add(-10 * time.Minute)
	finished := now.Add(-12 * time.Minute)
	grace := 15 * time.Minute
	ref := map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/e"}
	seen := Seen{ObservedAt: observed, ProviderRef: ref}
	row := func(mod func(*ledger.Execution)) ledger.Execution {
		r := ledger.Execution{UUID: "r", Active: true, Status: "running", ObservedAt: observed, ProviderRef: map[string]any{"execution": ref["execution"]}}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	snap := func(v executor.Verdict) executor.Snapshot {
		return executor.Snapshot{Verdict: v, FinishedAt: finished, Reason: "NON_ZERO_EXIT_CODE", Evidence: map[string]any{"etag": "e1"}}
	}

	tests := []struct {
		name        string
		row         ledger.Execution
		snap        executor.Snapshot
		wantKind    ledger.ChangeKind
		wantWhy     string
		wantOutcome string
		wantStatus  string
		wantReason  string
		wantAt      time.Time // completed_at, or unknown_since
		wantSettled string    // the settlement's reason, when it is not the usual one
	}{
		{name: "succeeded settles succeeded at the executor's time", row: row(nil), snap: snap(executor.VerdictSucceeded),
			wantKind: ledger.ChangeSettle, wantOutcome: "succeeded", wantStatus: "succeeded", wantAt: finished},
		{name: "failed settles failed with the reason", row: row(nil), snap: snap(executor.VerdictFailed),
			wantKind: ledger.ChangeSettle, wantOutcome: "failed", wantStatus: "failed", wantReason: "NON_ZERO_EXIT_CODE", wantAt: finished},
		{name: "cancelled settles cancelled", row: row(nil), snap: snap(executor.VerdictCancelled),
			wantKind: ledger.ChangeSettle, wantOutcome: "cancelled", wantStatus: "cancelled", wantReason: "NON_ZERO_EXIT_CODE", wantAt: finished},
		{name: "terminal without a finish time completes now", row: row(nil), snap: executor.Snapshot{Verdict: executor.VerdictSucceeded},
			wantKind: ledger.ChangeSettle, wantOutcome: "succeeded", wantStatus: "succeeded", wantAt: now},
		{name: "running refreshes", row: row(nil), snap: snap(executor.VerdictRunning), wantKind: ledger.ChangeRefresh},
		{name: "an unplaceable verdict keeps the row alive", row: row(nil), snap: executor.Snapshot{Verdict: "weird"}, wantKind: ledger.ChangeRefresh},
		{name: "first unknown starts the grace now", row: row(nil), snap: snap(executor.VerdictUnknown),
			wantKind: ledger.ChangeUnknown, wantAt: now},
		{name: "unknown within the grace keeps its first time", row: row(func(r *ledger.Execution) { r.Sync.UnknownSince = now.Add(-14 * time.Minute) }),
			snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeUnknown, wantAt: now.Add(-14 * time.Minute)},
		{name: "unknown for exactly the grace settles lost", row: row(func(r *ledger.Execution) { r.Sync.UnknownSince = now.Add(-grace) }),
			snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeSettle, wantOutcome: "lost", wantStatus: "failed", wantAt: now},
		{name: "unknown past the grace settles lost", row: row(func(r *ledger.Execution) { r.Sync.UnknownSince = now.Add(-time.Hour) }),
			snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeSettle, wantOutcome: "lost", wantStatus: "failed", wantAt: now},
		{name: "an unknown_since in the future restarts the grace", row: row(func(r *ledger.Execution) { r.Sync.UnknownSince = now.Add(time.Hour) }),
			snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeUnknown, wantAt: now},
		{name: "a Job last seen with its success decided and now gone settles succeeded, not lost", row: row(func(r *ledger.Execution) {
			r.Sync.PendingOutcome, r.Sync.LastVerdict = "succeeded", "running"
			r.Sync.LastSnapshot = map[string]any{"conditions": []any{map[string]any{"type": "SuccessCriteriaMet", "status": "True"}}}
		}), snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeSettle, wantOutcome: "succeeded", wantStatus: "succeeded", wantAt: now, wantSettled: ReasonDecidedThenGone},
		{name: "a Job last seen with its failure decided and now gone settles failed at once, within the grace", row: row(func(r *ledger.Execution) {
			r.Sync.PendingOutcome, r.Sync.LastVerdict = "failed", "running"
		}), snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeSettle, wantOutcome: "failed", wantStatus: "failed", wantAt: now, wantSettled: ReasonDecidedThenGone,
			wantReason: "the executor had decided the execution failed when it was last seen, and no longer knows it"},
		{name: "a decided outcome survives an unknown spell: gone past the grace still settles with it", row: row(func(r *ledger.Execution) {
			r.Sync.PendingOutcome, r.Sync.LastVerdict, r.Sync.UnknownSince = "succeeded", "unknown", now.Add(-time.Hour)
		}), snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeSettle, wantOutcome: "succeeded", wantStatus: "succeeded", wantAt: now, wantSettled: ReasonDecidedThenGone},
		{name: "a pending outcome that is not an outcome does not settle", row: row(func(r *ledger.Execution) { r.Sync.PendingOutcome = "running" }),
			snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeUnknown, wantAt: now},
		{name: "a Job still there with its outcome decided keeps running", row: row(func(r *ledger.Execution) { r.Sync.PendingOutcome = "succeeded" }),
			snap: executor.Snapshot{Verdict: executor.VerdictRunning, Pending: executor.VerdictSucceeded}, wantKind: ledger.ChangeRefresh},
		{name: "a settled row is left alone", row: row(func(r *ledger.Execution) { r.Active = false }), snap: snap(executor.VerdictSucceeded),
			wantKind: ledger.ChangeNone, wantWhy: WhyNotActive},
		{name: "a row this run settled already counts as this run's (an ambiguous commit that landed)", row: row(func(r *ledger.Execution) {
			r.Active, r.Status, r.Outcome = false, "succeeded", "succeeded"
			r.Settlement = &ledger.Settlement{WorkflowRunUUID: "run-1", Reason: ReasonExecutorTerminal}
		}), snap: snap(executor.VerdictSucceeded), wantKind: ledger.ChangeNone, wantWhy: WhySettledByThisRun, wantOutcome: "succeeded"},
		{name: "a row another run settled is left alone", row: row(func(r *ledger.Execution) {
			r.Active, r.Status, r.Outcome = false, "succeeded", "succeeded"
			r.Settlement = &ledger.Settlement{WorkflowRunUUID: "run-0", Reason: ReasonExecutorTerminal}
		}), snap: snap(executor.VerdictSucceeded), wantKind: ledger.ChangeNone, wantWhy: WhyNotActive},
		{name: "an active row naming this run in a stale settlement is not settled by it", row: row(func(r *ledger.Execution) {
			r.Settlement = &ledger.Settlement{WorkflowRunUUID: "run-1", Reason: ReasonExecutorTerminal}
		}), snap: snap(executor.VerdictRunning), wantKind: ledger.ChangeRefresh},
		{name: "a row confirmed since the scan is left alone", row: row(func(r *ledger.Execution) { r.ObservedAt = now }),
			snap: snap(executor.VerdictFailed), wantKind: ledger.ChangeNone, wantWhy: WhyObservedAtMoved},
		{name: "a row pointing at another execution is left alone", row: row(func(r *ledger.Execution) { r.ProviderRef = map[string]any{"execution": "other"} }),
			snap: snap(executor.VerdictFailed), wantKind: ledger.ChangeNone, wantWhy: WhyProviderRefChanged},
		{name: "a row refreshed since the scan is not marked lost", row: row(func(r *ledger.Execution) {
			r.ObservedAt = now
			r.Sync.UnknownSince = now.Add(-time.Hour)
		}), snap: snap(executor.VerdictUnknown), wantKind: ledger.ChangeNone, wantWhy: WhyObservedAtMoved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.row, seen, tt.snap, now, grace, "run-1", targetView{})
			if got.Kind != tt.wantKind || got.Why != tt.wantWhy {
				t.Fatalf("change = %s/%q, want %s/%q", got.Kind, got.Why, tt.wantKind, tt.wantWhy)
			}
			switch got.Kind {
			case ledger.ChangeNone:
				if got.Outcome != tt.wantOutcome {
					t.Errorf("outcome = %q, want %q", got.Outcome, tt.wantOutcome)
				}
			case ledger.ChangeSettle:
				if got.Outcome != tt.wantOutcome || got.Status != tt.wantStatus || !got.CompletedAt.Equal(tt.wantAt) {
					t.Errorf("settle = %s/%s at %v, want %s/%s at %v", got.Outcome, got.Status, got.CompletedAt, tt.wantOutcome, tt.wantStatus, tt.wantAt)
				}
				if want := cmp.Or(tt.wantSettled, map[bool]string{true: ReasonLost, false: ReasonExecutorTerminal}[tt.wantOutcome == "lost"]); got.Settlement.Reason != want {
					t.Errorf("settlement reason = %q, want %q", got.Settlement.Reason, want)
				}
				if tt.wantOutcome != "lost" && got.FailureReason != tt.wantReason {
					t.Errorf("failure reason = %q, want %q", got.FailureReason, tt.wantReason)
				}
				if tt.wantOutcome == "lost" && got.FailureReason == "" {
					t.Error("lost without a failure reason")
				}
				s := got.Settlement
				if s == nil || s.WorkflowRunUUID != "run-1" || !s.At.Equal(now) || s.Evidence["row_observed_at"] != observed {
					t.Errorf("settlement = %+v", s)
				}
				if tt.snap.Evidence != nil && tt.wantOutcome != "lost" && s.Evidence["etag"] != "e1" {
					t.Errorf("settlement lost the executor's evidence: %v", s.Evidence)
				}
			case ledger.ChangeUnknown:
				if !got.UnknownSince.Equal(tt.wantAt) {
					t.Errorf("unknown since %v, want %v", got.UnknownSince, tt.wantAt)
				}
			case ledger.ChangeRefresh:
				if !got.At.Equal(now) || got.Verdict != "running" {
					t.Errorf("refresh at %v verdict %s", got.At, got.Verdict)
				}
			}
		})
	}
}

func TestDecideDoesNotShareTheSnapshotEvidence(t *testing.T) {
	ev := map[string]any{"etag": "e1"}
	now := time.Now()
	row := ledger.Execution{Active: true, ObservedAt: now}
	got := decide(row, Seen{ObservedAt: now}, executor.Snapshot{Verdict: executor.VerdictSucceeded, Evidence: ev}, now, time.Minute, "r", targetView{})
	if _, leaked := ev["row_observed_at"]; leaked || got.Settlement.Evidence["etag"] != "e1" {
		t.Errorf("decide wrote into the snapshot's evidence map: %v", ev)
	}
}

// refuse is the whole rule about who may write a row; each case breaks one part of it.
func TestRefuse(t *testing.T) {
	const org, other, row = "org-a", "org-b", "row-1"
	mine := ledger.Execution{UUID: row, OrganizationUUID: org, Provider: ledger.ProviderCloudRun}
	message := Trust{Type: contract.ExecutionSyncCloudRun, Provider: ledger.ProviderCloudRun, CheckOptOut: true, CheckRun: true,
		Organization: org, RunnerExecution: row}
	inline := message
	inline.CheckRun = false
	run := func(typ contract.WorkflowType, status, scope string, started ...string) *ledger.RunFacts {
		return &ledger.RunFacts{WorkflowType: string(typ), Status: status, Organization: scope, Started: started}
	}
	publishing := ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateReconciling, org)}
	tests := []struct {
		name  string
		row   ledger.Execution
		facts ledger.Facts
		trust Trust
		want  string
	}{
		{"a message of a run still publishing its syncs", mine, publishing, message, ""},
		{"a message of a finished run that started the row", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateCompleted, org, "x", row)}, message, ""},
		{"a message of a failed run that started the row", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateFailed, org, row)}, message, ""},
		{"an inline sync", mine, ledger.Facts{OrganizationEnabled: true}, inline, ""},
		{"an inline sync the operator included", mine, ledger.Facts{}, func() Trust { t := inline; t.CheckOptOut = false; return t }(), ""},
		{"another organization's row", ledger.Execution{UUID: row, OrganizationUUID: other, Provider: ledger.ProviderCloudRun}, publishing, message, RefuseOtherOrganization},
		{"another executor's row", ledger.Execution{UUID: row, OrganizationUUID: org, Provider: ledger.ProviderKubernetes}, publishing, message, RefuseOtherProvider},
		{"an organization that opted out", mine, ledger.Facts{Run: publishing.Run}, message, RefuseDisabled},
		{"an organization that opted out, inline", mine, ledger.Facts{}, inline, RefuseDisabled},
		{"no such run", mine, ledger.Facts{OrganizationEnabled: true}, message, RefuseRunMissing},
		{"a run of another workflow", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncKubernetes, workflow.StateReconciling, org)}, message, RefuseRunOtherWorkflow},
		{"a run of another organization", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateReconciling, other)}, message, RefuseRunOtherScope},
		{"a finished run that did not start the row", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateCompleted, org, "x")}, message, RefuseRunDidNotStart},
		{"an abandoned run", mine, ledger.Facts{OrganizationEnabled: true, Run: run(contract.ExecutionSyncCloudRun, workflow.StateFailed, org)}, message, RefuseRunDidNotStart},
	}
	for _, tt := range tests {
		if got := refuse(tt.row, tt.facts, tt.trust); got != tt.want {
			t.Errorf("%s: refuse = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestQuiet(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	since := now.Add(-10 * time.Minute)
	keep := 15 * time.Minute
	unknown := func(mod func(*ledger.Execution)) ledger.Execution {
		r := ledger.Execution{Active: true, Sync: ledger.SyncState{LastVerdict: "unknown", UnknownSince: since, LastSyncedAt: since, Target: "t"}}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	change := ledger.ExecutionChange{Kind: ledger.ChangeUnknown, At: now, Verdict: "unknown", UnknownSince: since, Target: "t"}
	for _, tt := range []struct {
		name  string
		row   ledger.Execution
		ch    ledger.ExecutionChange
		quiet bool
	}{
		{"still unknown since the same time, written lately: nothing to write", unknown(nil), change, true},
		{"held past the grace, same spell: nothing to write", unknown(nil), func() ledger.ExecutionChange { c := change; c.Why = WhyBlindExecutor; return c }(), true},
		{"written a keep-alive ago: written again, for the guard's window", unknown(func(r *ledger.Execution) { r.Sync.LastSyncedAt = now.Add(-keep) }), change, false},
		{"first unknown after running: written", unknown(func(r *ledger.Execution) { r.Sync.LastVerdict, r.Sync.UnknownSince = "running", time.Time{} }), change, false},
		{"a new spell (unknown_since moved): written", unknown(func(r *ledger.Execution) { r.Sync.UnknownSince = since.Add(-time.Minute) }), change, false},
		{"another target answered: written", unknown(func(r *ledger.Execution) { r.Sync.Target = "other" }), change, false},
		{"never synced: written", unknown(func(r *ledger.Execution) { r.Sync.LastSyncedAt = time.Time{} }), change, false},
		{"last synced in the future: written", unknown(func(r *ledger.Execution) { r.Sync.LastSyncedAt = now.Add(time.Minute) }), change, false},
		{"a refresh is never quiet", unknown(nil), ledger.ExecutionChange{Kind: ledger.ChangeRefresh, At: now, Target: "t"}, false},
		{"a settlement is never quiet", unknown(nil), ledger.ExecutionChange{Kind: ledger.ChangeSettle, At: now, Target: "t"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := quiet(tt.row, tt.ch, keep); got != tt.quiet {
				t.Errorf("quiet = %t, want %t", got, tt.quiet)
			}
		})
	}
}
