// Package cloudrun is the Cloud Run executor adapter: it asks the Cloud Run Admin API v2
// Executions service about one execution and reduces the answer to an executor.Snapshot.
//
// The generated client sets no timeout for GetExecution, hence the policy's per-call one.
// NotFound is VerdictUnknown: Cloud Run keeps about 1,000 executions per job for about 7 days,
// so an old row's execution is usually aged out, not failed.
package cloudrun

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// ExecutionGetter is the one call the adapter needs; *run.ExecutionsClient has it as is.
type ExecutionGetter interface {
	GetExecution(ctx context.Context, req *runpb.GetExecutionRequest, opts ...gax.CallOption) (*runpb.Execution, error)
}

// Config bounds the adapter's calls to Cloud Run (zero: the executor package's defaults).
type Config = executor.Config

// Adapter observes Cloud Run executions.
type Adapter struct {
	client ExecutionGetter
	policy executor.RetryPolicy
}

// New returns an adapter calling client.
func New(client ExecutionGetter, cfg Config) *Adapter {
	return &Adapter{client: client, policy: cfg.Policy()}
}

// RefKey is the provider_ref key that holds the execution's full resource name.
const RefKey = "execution"

var executionName = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/jobs/[^/]+/executions/[^/]+$`)

// Name returns the execution resource name a row's provider_ref names, and whether it is one.
func Name(ref map[string]any) (string, bool) {
	name, _ := ref[RefKey].(string)
	return name, executionName.MatchString(name)
}

// ValidRef reports whether a row's provider_ref names a Cloud Run execution.
func (a *Adapter) ValidRef(ref map[string]any) bool {
	_, ok := Name(ref)
	return ok
}

// Target is the project and region of the execution ref names: "cloud_run:projects/P/locations/L".
func (a *Adapter) Target(ref map[string]any) string {
	name, ok := Name(ref)
	if !ok {
		return ""
	}
	parts := strings.SplitN(name, "/", 5) // projects, P, locations, L, rest
	return "cloud_run:" + strings.Join(parts[:4], "/")
}

// Observe asks Cloud Run about the execution ref names.
func (a *Adapter) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	name, ok := Name(ref)
	if !ok {
		return executor.Snapshot{}, status.Errorf(codes.InvalidArgument, "provider_ref.%s %q is not an execution name", RefKey, name)
	}
	req := &runpb.GetExecutionRequest{Name: name}
	var snap executor.Snapshot
	attempts, err := a.policy.Do(ctx, status.Code, func(ctx context.Context) error {
		e, err := a.client.GetExecution(ctx, req)
		switch {
		case err == nil:
			snap = Classify(e)
		case status.Code(err) == codes.NotFound:
			snap = executor.Snapshot{
				Verdict:  executor.VerdictUnknown,
				Evidence: map[string]any{"source": "cloud_run", "execution": name, "error": "NotFound"},
			}
		default:
			return err
		}
		return nil
	})
	switch {
	case err == nil:
		return snap, nil
	case ctx.Err() != nil:
		return executor.Snapshot{}, fmt.Errorf("get execution %s: %w", name, ctx.Err())
	default:
		return executor.Snapshot{}, fmt.Errorf("get execution %s (attempt %d): %w", name, attempts, err)
	}
}

// CompletedCondition is the execution condition whose state decides the outcome.
const CompletedCondition = "Completed"

// Classify reduces an execution to a verdict as docs/architecture.md (step 5) lists; it is pure.
// completion_time is not ordered across operations, so it never overrides a condition.
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
