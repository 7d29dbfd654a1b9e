package cloudrun

import (
	"time"

	"cloud.google.com/go/run/apiv2/runpb"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// CompletedCondition is the execution condition whose state decides the outcome.
const CompletedCondition = "Completed"

// Classify reduces an execution to a verdict. It is pure: the whole decision is in the message.
//
// The rules, in order:
//  1. reconciling is true → running: Cloud Run is still driving the execution, whatever its
//     conditions say for now.
//  2. the Completed condition decides when it has a state: SUCCEEDED → succeeded; FAILED with
//     execution reason CANCELLED → cancelled; FAILED with CANCELLING (a cancel in progress),
//     JOB_STATUS_SERVICE_POLLING_ERROR (the service retries) or DELAYED_START_PENDING → running;
//     FAILED with any other reason → failed; PENDING or RECONCILING → running.
//  3. without a Completed state, completion_time is a fallback, and only with task counts that
//     agree: all tasks succeeded → succeeded, any cancelled → cancelled, any failed → failed.
//     completion_time is not ordered across operations, so it never overrides a condition.
//  4. otherwise → running.
func Classify(e *runpb.Execution) executor.Snapshot {
	snap := executor.Snapshot{Verdict: executor.VerdictRunning, Evidence: Evidence(e)}
	if e.GetReconciling() {
		return snap
	}
	if c := completed(e); c != nil && c.GetState() != runpb.Condition_STATE_UNSPECIFIED {
		switch c.GetState() {
		case runpb.Condition_CONDITION_SUCCEEDED:
			snap.Verdict = executor.VerdictSucceeded
		case runpb.Condition_CONDITION_FAILED:
			switch c.GetExecutionReason() {
			case runpb.Condition_CANCELLED:
				snap.Verdict = executor.VerdictCancelled
				snap.Reason = reasonText(c)
			case runpb.Condition_CANCELLING, runpb.Condition_JOB_STATUS_SERVICE_POLLING_ERROR,
				runpb.Condition_DELAYED_START_PENDING:
				return snap
			default:
				snap.Verdict = executor.VerdictFailed
				snap.Reason = reasonText(c)
			}
		default: // PENDING, RECONCILING
			return snap
		}
		snap.FinishedAt = finishedAt(c, e)
		return snap
	}
	if e.GetCompletionTime() == nil {
		return snap
	}
	switch {
	case e.GetCancelledCount() > 0:
		snap.Verdict = executor.VerdictCancelled
		snap.Reason = "completion_time set without a Completed condition; tasks cancelled"
	case e.GetFailedCount() > 0:
		snap.Verdict = executor.VerdictFailed
		snap.Reason = "completion_time set without a Completed condition; tasks failed"
	case e.GetTaskCount() > 0 && e.GetSucceededCount() >= e.GetTaskCount():
		snap.Verdict = executor.VerdictSucceeded
	default:
		return snap
	}
	snap.FinishedAt = e.GetCompletionTime().AsTime()
	return snap
}

func completed(e *runpb.Execution) *runpb.Condition {
	for _, c := range e.GetConditions() {
		if c.GetType() == CompletedCondition {
			return c
		}
	}
	return nil
}

// finishedAt prefers the Completed condition's transition time, then completion_time.
func finishedAt(c *runpb.Condition, e *runpb.Execution) time.Time {
	if t := c.GetLastTransitionTime(); t != nil {
		return t.AsTime()
	}
	if t := e.GetCompletionTime(); t != nil {
		return t.AsTime()
	}
	return time.Time{}
}

func reasonText(c *runpb.Condition) string {
	reason := conditionReason(c)
	switch {
	case reason != "" && c.GetMessage() != "":
		return reason + ": " + c.GetMessage()
	case reason != "":
		return reason
	default:
		return c.GetMessage()
	}
}

// conditionReason is the name of whichever reason the condition carries, or "".
func conditionReason(c *runpb.Condition) string {
	switch r := c.GetReasons().(type) {
	case *runpb.Condition_ExecutionReason_:
		if r.ExecutionReason != runpb.Condition_EXECUTION_REASON_UNDEFINED {
			return r.ExecutionReason.String()
		}
	case *runpb.Condition_Reason:
		if r.Reason != runpb.Condition_COMMON_REASON_UNDEFINED {
			return r.Reason.String()
		}
	case *runpb.Condition_RevisionReason_:
		if r.RevisionReason != runpb.Condition_REVISION_REASON_UNDEFINED {
			return r.RevisionReason.String()
		}
	}
	return ""
}

// Evidence is the part of an execution a settlement keeps, to show later why it was settled so.
func Evidence(e *runpb.Execution) map[string]any {
	conds := make([]any, 0, len(e.GetConditions()))
	for _, c := range e.GetConditions() {
		m := map[string]any{
			"type":  c.GetType(),
			"state": c.GetState().String(),
		}
		if r := conditionReason(c); r != "" {
			m["reason"] = r
		}
		if c.GetMessage() != "" {
			m["message"] = c.GetMessage()
		}
		if t := c.GetLastTransitionTime(); t != nil {
			m["last_transition_time"] = t.AsTime()
		}
		conds = append(conds, m)
	}
	ev := map[string]any{
		"source":          "cloud_run",
		"execution":       e.GetName(),
		"conditions":      conds,
		"reconciling":     e.GetReconciling(),
		"task_count":      int64(e.GetTaskCount()),
		"running_count":   int64(e.GetRunningCount()),
		"succeeded_count": int64(e.GetSucceededCount()),
		"failed_count":    int64(e.GetFailedCount()),
		"cancelled_count": int64(e.GetCancelledCount()),
		"retried_count":   int64(e.GetRetriedCount()),
		"etag":            e.GetEtag(),
		"log_uri":         e.GetLogUri(),
	}
	if t := e.GetCompletionTime(); t != nil {
		ev["completion_time"] = t.AsTime()
	}
	return ev
}
