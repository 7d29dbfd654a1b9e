package cloudrun

import (
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stalesweep/stalesweep/internal/executor"
)

var (
	t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	t1 = t0.Add(10 * time.Minute)
	t2 = t0.Add(20 * time.Minute)
)

func completedCond(state runpb.Condition_State, reason runpb.Condition_ExecutionReason, at time.Time) *runpb.Condition {
	c := &runpb.Condition{Type: "Completed", State: state, Message: "msg", LastTransitionTime: timestamppb.New(at)}
	if reason != runpb.Condition_EXECUTION_REASON_UNDEFINED {
		c.Reasons = &runpb.Condition_ExecutionReason_{ExecutionReason: reason}
	}
	return c
}

func exec(mod func(e *runpb.Execution), conds ...*runpb.Condition) *runpb.Execution {
	e := &runpb.Execution{
		Name:      "projects/p/locations/l/jobs/j/executions/e",
		TaskCount: 2,
		Conditions: append([]*runpb.Condition{
			{Type: "ResourcesAvailable", State: runpb.Condition_CONDITION_SUCCEEDED},
			{Type: "Started", State: runpb.Condition_CONDITION_SUCCEEDED},
		}, conds...),
		Etag:   `"abc"`,
		LogUri: "https://console.cloud.google.com/logs",
	}
	if mod != nil {
		mod(e)
	}
	return e
}

func TestClassify(t *testing.T) {
	undefined := runpb.Condition_EXECUTION_REASON_UNDEFINED
	tests := []struct {
		name       string
		exec       *runpb.Execution
		want       executor.Verdict
		wantAt     time.Time
		wantReason string
	}{
		{name: "Completed SUCCEEDED is succeeded at its transition time",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_SUCCEEDED, undefined, t1)), want: executor.VerdictSucceeded, wantAt: t1},
		{name: "Completed SUCCEEDED wins over an older completion_time",
			exec: exec(func(e *runpb.Execution) { e.CompletionTime = timestamppb.New(t0) }, completedCond(runpb.Condition_CONDITION_SUCCEEDED, undefined, t1)),
			want: executor.VerdictSucceeded, wantAt: t1},
		{name: "Completed SUCCEEDED without a transition time falls back to completion_time",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.Conditions[2].LastTransitionTime = nil
			}, completedCond(runpb.Condition_CONDITION_SUCCEEDED, undefined, t1)),
			want: executor.VerdictSucceeded, wantAt: t2},
		{name: "FAILED NON_ZERO_EXIT_CODE is failed with the reason",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_NON_ZERO_EXIT_CODE, t1)),
			want: executor.VerdictFailed, wantAt: t1, wantReason: "NON_ZERO_EXIT_CODE: msg"},
		{name: "FAILED CANCELLED is cancelled",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_CANCELLED, t1)),
			want: executor.VerdictCancelled, wantAt: t1, wantReason: "CANCELLED: msg"},
		{name: "FAILED CANCELLING is still running",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_CANCELLING, t1)), want: executor.VerdictRunning},
		{name: "FAILED JOB_STATUS_SERVICE_POLLING_ERROR is still running (the service retries)",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_JOB_STATUS_SERVICE_POLLING_ERROR, t1)), want: executor.VerdictRunning},
		{name: "FAILED DELAYED_START_PENDING is still running",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_DELAYED_START_PENDING, t1)), want: executor.VerdictRunning},
		{name: "FAILED DELAYED_EXECUTION_EXCEEDING_DURATION_LIMIT is failed",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_DELAYED_EXECUTION_EXCEEDING_DURATION_LIMIT, t1)),
			want: executor.VerdictFailed, wantAt: t1, wantReason: "DELAYED_EXECUTION_EXCEEDING_DURATION_LIMIT: msg"},
		{name: "FAILED DELETED is failed",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_DELETED, t1)),
			want: executor.VerdictFailed, wantAt: t1, wantReason: "DELETED: msg"},
		{name: "FAILED with no reason is failed with the message",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_FAILED, undefined, t1)),
			want: executor.VerdictFailed, wantAt: t1, wantReason: "msg"},
		{name: "Completed PENDING is running",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_PENDING, undefined, t1)), want: executor.VerdictRunning},
		{name: "Completed RECONCILING is running",
			exec: exec(nil, completedCond(runpb.Condition_CONDITION_RECONCILING, undefined, t1)), want: executor.VerdictRunning},
		{name: "Completed RECONCILING with a stale completion_time is running",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t0)
				e.SucceededCount = 2
			}, completedCond(runpb.Condition_CONDITION_RECONCILING, undefined, t1)), want: executor.VerdictRunning},
		{name: "reconciling true overrides Completed SUCCEEDED",
			exec: exec(func(e *runpb.Execution) { e.Reconciling = true }, completedCond(runpb.Condition_CONDITION_SUCCEEDED, undefined, t1)),
			want: executor.VerdictRunning},
		{name: "reconciling true overrides Completed FAILED",
			exec: exec(func(e *runpb.Execution) { e.Reconciling = true }, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_NON_ZERO_EXIT_CODE, t1)),
			want: executor.VerdictRunning},
		{name: "no conditions at all is running", exec: &runpb.Execution{Name: "x"}, want: executor.VerdictRunning},
		{name: "no Completed condition and no completion_time is running", exec: exec(nil), want: executor.VerdictRunning},
		{name: "Completed with STATE_UNSPECIFIED and no completion_time is running",
			exec: exec(nil, &runpb.Condition{Type: "Completed"}), want: executor.VerdictRunning},
		{name: "fallback: completion_time and all tasks succeeded is succeeded",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.SucceededCount = 2
			}), want: executor.VerdictSucceeded, wantAt: t2},
		{name: "fallback: completion_time with a failed task is failed",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.SucceededCount, e.FailedCount = 1, 1
			}), want: executor.VerdictFailed, wantAt: t2, wantReason: "completion_time set without a Completed condition; tasks failed"},
		{name: "fallback: completion_time with a cancelled task is cancelled",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.CancelledCount = 2
			}), want: executor.VerdictCancelled, wantAt: t2, wantReason: "completion_time set without a Completed condition; tasks cancelled"},
		{name: "fallback: completion_time with counts that do not add up is running",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.SucceededCount = 1
			}), want: executor.VerdictRunning},
		{name: "fallback applies under a Completed condition of unspecified state",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.SucceededCount = 2
			}, &runpb.Condition{Type: "Completed"}), want: executor.VerdictSucceeded, wantAt: t2},
		{name: "fallback never applies while reconciling",
			exec: exec(func(e *runpb.Execution) {
				e.CompletionTime = timestamppb.New(t2)
				e.SucceededCount = 2
				e.Reconciling = true
			}), want: executor.VerdictRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.exec)
			if got.Verdict != tt.want {
				t.Fatalf("verdict = %s, want %s", got.Verdict, tt.want)
			}
			if !got.FinishedAt.Equal(tt.wantAt) {
				t.Errorf("finished at = %v, want %v", got.FinishedAt, tt.wantAt)
			}
			if got.Reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", got.Reason, tt.wantReason)
			}
			if got.Evidence["execution"] != tt.exec.GetName() {
				t.Errorf("evidence names execution %v, want %s", got.Evidence["execution"], tt.exec.GetName())
			}
		})
	}
}

func TestEvidenceKeepsWhatJustifiesTheVerdict(t *testing.T) {
	e := exec(func(e *runpb.Execution) {
		e.SucceededCount, e.FailedCount, e.RetriedCount = 1, 1, 3
		e.CompletionTime = timestamppb.New(t2)
	}, completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_NON_ZERO_EXIT_CODE, t1))
	ev := Evidence(e)
	for key, want := range map[string]any{
		"etag": `"abc"`, "log_uri": "https://console.cloud.google.com/logs", "task_count": int64(2),
		"succeeded_count": int64(1), "failed_count": int64(1), "retried_count": int64(3), "completion_time": t2,
	} {
		if ev[key] != want {
			t.Errorf("evidence[%s] = %v, want %v", key, ev[key], want)
		}
	}
	conds, _ := ev["conditions"].([]any)
	if len(conds) != 3 {
		t.Fatalf("evidence has %d conditions, want 3", len(conds))
	}
	last := conds[2].(map[string]any)
	if last["type"] != "Completed" || last["state"] != "CONDITION_FAILED" || last["reason"] != "NON_ZERO_EXIT_CODE" {
		t.Errorf("Completed condition evidence = %v", last)
	}
}

func TestName(t *testing.T) {
	for ref, ok := range map[string]bool{
		"projects/p/locations/l/jobs/j/executions/e":   true,
		"projects/p/locations/l/jobs/j/executions/":    false,
		"projects/p/locations/l/jobs/j":                false,
		"projects/p/locations/l/jobs/j/executions/e/x": false,
		"": false,
	} {
		if _, got := Name(map[string]any{"execution": ref}); got != ok {
			t.Errorf("Name(%q) ok = %t, want %t", ref, got, ok)
		}
	}
	if _, ok := Name(map[string]any{"execution": 42}); ok {
		t.Error("a non-string execution is a valid ref")
	}
	if _, ok := Name(nil); ok {
		t.Error("a nil ref is a valid ref")
	}
}
