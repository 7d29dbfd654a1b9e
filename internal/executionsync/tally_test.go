package executionsync_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/memstore"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// answers is an executor in memory: what it says about each execution, by the last segment of
// its name; an execution it has no answer for is NotFound.
type answers struct {
	mu    sync.Mutex
	said  map[string]executor.Snapshot
	err   map[string]error
	calls []string
}

func (a *answers) ValidRef(ref map[string]any) bool {
	name, _ := ref["execution"].(string)
	return strings.HasPrefix(name, "projects/")
}

func (a *answers) Target(map[string]any) string { return "projects/p/locations/l" }

func (a *answers) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	name, _ := ref["execution"].(string)
	id := name[strings.LastIndex(name, "/")+1:]
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, id)
	if err := a.err[id]; err != nil {
		return executor.Snapshot{}, err
	}
	if s, ok := a.said[id]; ok {
		return s, nil
	}
	return executor.Snapshot{Verdict: executor.VerdictUnknown}, nil
}

// judge is a blind-executor guard in memory: every judgment it makes says blind.
type judge struct{ store *memstore.Executions }

func (j judge) Judge(_ context.Context, target string, now time.Time) (ledger.Target, error) {
	t := ledger.Target{Target: target, Blind: true, JudgedAt: now, Asked: 10, Unknown: 10}
	j.store.PutTarget(t)
	return t, nil
}

func (j judge) Assess(_ context.Context, target string, now time.Time) (ledger.Target, error) {
	return ledger.Target{Target: target, Blind: true, JudgedAt: now, Asked: 10, Unknown: 10}, nil
}

// syncTally is what one execution-sync run decided, in a form a table can state.
type syncTally struct {
	started, failedStart, skipped, candidates int
	settled                                   string // outcome=count, sorted
	refreshed, unknown, raced, errored        int
	deferred                                  int
	refused, blind                            string // why=count, sorted
	malformed, invisible                      int
	scanCapped                                bool
	stoppedBy, failed                         string
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// The decision and tally logic of one execution-sync run, against the in-memory store (both
// tiers): what each row's sync decides and how the run counts it.
func TestSyncRunDecidesAndCountsEachRow(t *testing.T) {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	old := now.Add(-10 * time.Minute)
	grace := 15 * time.Minute
	stale := func(s *memstore.Executions, id string, mod func(*ledger.Execution)) {
		e := ledger.Execution{UUID: id, OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true,
			ObservedAt: old, ProviderRef: map[string]any{"execution": "projects/p/locations/l/jobs/j/executions/" + id}}
		if mod != nil {
			mod(&e)
		}
		s.Put(e)
	}
	verdict := func(v executor.Verdict) executor.Snapshot {
		return executor.Snapshot{Verdict: v, FinishedAt: old, Evidence: map[string]any{"etag": "e"}}
	}
	for _, c := range []struct {
		name     string
		limit    int
		disabled bool // the organization has opted out; the run does not include disabled ones
		guard    bool
		seed     func(s *memstore.Executions, a *answers, cancel func())
		want     syncTally
	}{
		{
			name: "each verdict decides its row",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				for _, id := range []string{"ok", "bad", "stop", "live", "gone", "lost"} {
					stale(s, id, nil)
				}
				stale(s, "lost", func(e *ledger.Execution) { e.Sync.UnknownSince = now.Add(-grace) })
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded), "bad": verdict(executor.VerdictFailed),
					"stop": verdict(executor.VerdictCancelled), "live": verdict(executor.VerdictRunning)}
			},
			want: syncTally{started: 6, candidates: 6, settled: "cancelled=1,failed=1,lost=1,succeeded=1", refreshed: 1, unknown: 1},
		},
		{
			name: "rows without a provider reference, malformed and fresh rows: skipped, counted or unread",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "ok", nil)
				stale(s, "no-ref", func(e *ledger.Execution) { e.ProviderRef = nil })
				stale(s, "bad-ref", func(e *ledger.Execution) { e.ProviderRef = map[string]any{"execution": "jobs/x"} })
				s.Put(ledger.Execution{UUID: "broken", OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true, ObservedAt: old, Malformed: "x"})
				stale(s, "fresh", func(e *ledger.Execution) { e.ObservedAt = now.Add(-30 * time.Second) })
				stale(s, "kube", func(e *ledger.Execution) { e.Provider = ledger.ProviderKubernetes })
				stale(s, "other-org", func(e *ledger.Execution) { e.OrganizationUUID = "o2" })
				s.PutInvisible(ledger.Execution{UUID: "inv", OrganizationUUID: "o", Provider: ledger.ProviderCloudRun, Active: true})
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded)}
			},
			want: syncTally{started: 1, candidates: 4, skipped: 3, settled: "succeeded=1", malformed: 1, invisible: 1},
		},
		{
			name: "an executor error is counted and recorded; the others go ahead",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "ok", nil)
				stale(s, "down", nil)
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded)}
				a.err = map[string]error{"down": status.Error(codes.Unavailable, "down")}
			},
			want: syncTally{started: 1, failedStart: 1, candidates: 2, settled: "succeeded=1", errored: 1},
		},
		{
			name: "an executor that answers no call fails the run: it could not see the executor",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "a", nil)
				stale(s, "b", nil)
				stale(s, "no-ref", func(e *ledger.Execution) { e.ProviderRef = nil })
				a.err = map[string]error{"a": status.Error(codes.Unavailable, "connection refused"), "b": status.Error(codes.DeadlineExceeded, "timed out")}
			},
			want: syncTally{failedStart: 2, candidates: 3, skipped: 1, errored: 2, failed: "executor_unreachable"},
		},
		{
			name: "an executor that answers every call with an error of its own was reached: the run completes",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "a", nil)
				stale(s, "b", nil)
				a.err = map[string]error{"a": status.Error(codes.Unavailable, "connection refused"), "b": status.Error(codes.Internal, "oops")}
			},
			want: syncTally{failedStart: 2, candidates: 2, errored: 2},
		},
		{
			name: "a run with nothing to ask the executor is not unreachable",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "no-ref", func(e *ledger.Execution) { e.ProviderRef = nil })
			},
			want: syncTally{candidates: 1, skipped: 1},
		},
		{
			name:  "a refusal to answer stops executor calls, defers the rest and fails the run",
			limit: 5,
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				a.err = map[string]error{}
				for i := range 5 {
					id := fmt.Sprintf("r%d", i)
					stale(s, id, nil)
					a.err[id] = status.Error(codes.PermissionDenied, "no")
				}
			},
			want: syncTally{failedStart: 5, candidates: 5, errored: 1, deferred: 4, stoppedBy: "permission_denied", failed: "executor_permission_denied"},
		},
		{
			name: "quota stops executor calls without failing the run",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "a", nil)
				stale(s, "b", nil)
				a.err = map[string]error{"a": status.Error(codes.ResourceExhausted, "quota"), "b": status.Error(codes.ResourceExhausted, "quota")}
			},
			want: syncTally{failedStart: 2, candidates: 2, errored: 1, deferred: 1, stoppedBy: "resource_exhausted"},
		},
		{
			name: "a row that moved after the scan is left and counted as raced",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "ok", nil)
				stale(s, "alive", nil)
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded), "alive": verdict(executor.VerdictSucceeded)}
				s.Before = func(id string) {
					if id == "alive" {
						stale(s, id, func(e *ledger.Execution) { e.ObservedAt = now })
					}
				}
			},
			want: syncTally{started: 2, candidates: 2, settled: "succeeded=1", raced: 1},
		},
		{
			name: "a transaction that fails twice is errored; one that fails once is tried again",
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "once", nil)
				stale(s, "twice", nil)
				a.said = map[string]executor.Snapshot{"once": verdict(executor.VerdictSucceeded), "twice": verdict(executor.VerdictSucceeded)}
				var mu sync.Mutex
				failed := map[string]int{}
				s.Fail = func(op, id string) error {
					mu.Lock()
					defer mu.Unlock()
					if op != "Apply" || (id == "once" && failed[id] == 1) {
						return nil
					}
					failed[id]++
					return status.Error(codes.Aborted, "contention")
				}
			},
			want: syncTally{started: 1, failedStart: 1, candidates: 2, settled: "succeeded=1", errored: 1},
		},
		{
			name:  "the limit bounds the syncs; the scan reads at most ScanFactor × limit",
			limit: 2,
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				for i := range 10 {
					stale(s, fmt.Sprintf("no-ref-%d", i), func(e *ledger.Execution) {
						e.ProviderRef, e.ObservedAt = nil, old.Add(-time.Hour)
					})
				}
				stale(s, "behind", nil)
			},
			want: syncTally{candidates: 8, skipped: 8, scanCapped: true},
		},
		{
			name:     "an organization that opted out is refused in each row's transaction",
			disabled: true,
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "ok", nil)
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded)}
			},
			want: syncTally{started: 1, candidates: 1, refused: "organization_disabled=1"},
		},
		{
			name:  "a blind target holds rows past the grace unknown, not lost",
			guard: true,
			seed: func(s *memstore.Executions, a *answers, _ func()) {
				stale(s, "lost", func(e *ledger.Execution) { e.Sync.UnknownSince = now.Add(-time.Hour) })
				stale(s, "ok", nil)
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded)}
			},
			want: syncTally{started: 2, candidates: 2, settled: "succeeded=1", unknown: 1, blind: "projects/p/locations/l=1"},
		},
		{
			name: "once the budget is spent the rest are deferred, not errored",
			seed: func(s *memstore.Executions, a *answers, cancel func()) {
				stale(s, "ok", nil)
				stale(s, "late", func(e *ledger.Execution) { e.ObservedAt = old.Add(time.Second) })
				a.said = map[string]executor.Snapshot{"ok": verdict(executor.VerdictSucceeded), "late": verdict(executor.VerdictSucceeded)}
				s.Before = func(string) { cancel() }
			},
			want: syncTally{failedStart: 2, candidates: 2, deferred: 2},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := memstore.NewExecutions()
			s.PutOrganization("o", !c.disabled)
			a := &answers{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.seed(s, a, cancel)
			clock := func() time.Time { return now }
			var guard executionsync.TargetJudge
			if c.guard {
				guard = judge{s}
			}
			syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: s, Executor: a, Kind: executionsync.CloudRun, Now: clock, LostGrace: grace, Log: logging.Discard(), Guard: guard})
			wf, err := executionsync.New(s, a, &executionsync.Inline{Syncer: syncer, Concurrency: 1},
				executionsync.Config{Provider: ledger.ProviderCloudRun, LostGrace: grace}, clock, nil)
			if err != nil {
				t.Fatal(err)
			}
			limit := cmp.Or(c.limit, 25)
			out, stats, err := wf.RunOnce(ctx, workflow.Run{UUID: "run-1", Logger: logging.Discard()},
				executionsync.Input{OrganizationUUID: "o", Limit: limit, MinAgeSeconds: 60})
			got := syncTally{started: out.StartedCount, failedStart: out.FailedStartCount, skipped: out.SkippedMissingMetadataCount,
				candidates: out.CandidateCount, settled: counts(stats.Settled), refreshed: stats.Refreshed, unknown: stats.Unknown,
				raced: stats.Raced, errored: stats.Errored, deferred: stats.Deferred, refused: counts(stats.Refused), blind: counts(stats.Blind),
				scanCapped: stats.ScanCapped, stoppedBy: stats.StoppedBy}
			if stats.Malformed != nil {
				got.malformed = stats.Malformed.Count
			}
			if stats.Invisible != nil {
				got.invisible = int(stats.Invisible.Count)
			}
			var se *workflow.StepError
			if errors.As(err, &se) {
				got.failed = se.Reason
			} else if err != nil {
				t.Fatalf("run failed without a step error: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if len(out.StartedRunnerExecutionUUIDs) != out.StartedCount || len(out.FailedRunnerExecutionUUIDs) != out.FailedStartCount {
				t.Errorf("listed %d started and %d failed, counted %d and %d", len(out.StartedRunnerExecutionUUIDs),
					len(out.FailedRunnerExecutionUUIDs), out.StartedCount, out.FailedStartCount)
			}
			// What the run counted is what the store holds.
			var settled []string
			for _, id := range out.StartedRunnerExecutionUUIDs {
				if e, _ := s.Get(id); !e.Active {
					settled = append(settled, e.Outcome)
					if e.Settlement == nil || e.Settlement.WorkflowRunUUID != "run-1" {
						t.Errorf("settled %s carries settlement %+v", id, e.Settlement)
					}
				}
			}
			if n := len(settled); n != sum(stats.Settled) {
				t.Errorf("%d rows settled in the store, %d counted", n, sum(stats.Settled))
			}
			for _, id := range out.FailedRunnerExecutionUUIDs {
				if e, _ := s.Get(id); !e.Active {
					t.Errorf("failed start %s was settled: %+v", id, e)
				}
			}
		})
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
