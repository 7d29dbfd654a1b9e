package cloudrunfake

import (
	"fmt"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The builders below return executions in the states Cloud Run reports, with the conditions,
// counts and completion times it sets in each, for one task unless the caller changes TaskCount.
// at is when the state was entered.

// ExecutionName builds a full execution resource name.
func ExecutionName(project, location, job, execution string) string {
	return fmt.Sprintf("projects/%s/locations/%s/jobs/%s/executions/%s", project, location, job, execution)
}

func base(name string, at time.Time) *runpb.Execution {
	p, err := parseExecution(name)
	if err != nil {
		panic(fmt.Sprintf("cloudrunfake: %v", err)) // builders take names the test wrote
	}
	ts := timestamppb.New(at)
	return &runpb.Execution{
		Name:        name,
		Job:         p.job,
		TaskCount:   1,
		Parallelism: 1,
		CreateTime:  ts,
		StartTime:   ts,
		LogUri:      fmt.Sprintf("https://console.cloud.google.com/logs/viewer?project=%s&resource=cloud_run_job/job_name/%s/location/%s&filter=labels.%%22run.googleapis.com/execution_name%%22=%s", p.project, p.job, p.location, p.execution),
		Conditions: []*runpb.Condition{
			{Type: "ResourcesAvailable", State: runpb.Condition_CONDITION_SUCCEEDED, LastTransitionTime: ts},
			{Type: "Started", State: runpb.Condition_CONDITION_SUCCEEDED, LastTransitionTime: ts},
		},
	}
}

func completedCond(state runpb.Condition_State, reason runpb.Condition_ExecutionReason, msg string, at time.Time) *runpb.Condition {
	c := &runpb.Condition{Type: "Completed", State: state, Message: msg, LastTransitionTime: timestamppb.New(at)}
	if reason != runpb.Condition_EXECUTION_REASON_UNDEFINED {
		c.Reasons = &runpb.Condition_ExecutionReason_{ExecutionReason: reason}
	}
	return c
}

// Pending is an execution waiting for resources: Completed is PENDING, nothing started.
func Pending(name string, at time.Time) *runpb.Execution {
	e := base(name, at)
	e.StartTime = nil
	e.Conditions = []*runpb.Condition{
		{Type: "ResourcesAvailable", State: runpb.Condition_CONDITION_PENDING, LastTransitionTime: timestamppb.New(at)},
		completedCond(runpb.Condition_CONDITION_PENDING, runpb.Condition_EXECUTION_REASON_UNDEFINED, "", at),
	}
	return e
}

// Running is an execution whose tasks run: Completed is RECONCILING.
func Running(name string, at time.Time) *runpb.Execution {
	e := base(name, at)
	e.RunningCount = 1
	e.Conditions = append(e.Conditions, completedCond(runpb.Condition_CONDITION_RECONCILING, runpb.Condition_EXECUTION_REASON_UNDEFINED, "", at))
	return e
}

// Reconciling is an execution Cloud Run is still driving: reconciling is true.
func Reconciling(name string, at time.Time) *runpb.Execution {
	e := Running(name, at)
	e.Reconciling = true
	return e
}

// completed is an execution that ran for a minute and completed at `at`, its Completed condition
// in state for reason, saying message.
func completed(name string, at time.Time, state runpb.Condition_State, reason runpb.Condition_ExecutionReason, message string) *runpb.Execution {
	e := base(name, at.Add(-time.Minute))
	e.CompletionTime = timestamppb.New(at)
	e.Conditions = append(e.Conditions, completedCond(state, reason, message, at))
	return e
}

// Succeeded is an execution whose tasks all succeeded.
func Succeeded(name string, at time.Time) *runpb.Execution {
	e := completed(name, at, runpb.Condition_CONDITION_SUCCEEDED, runpb.Condition_EXECUTION_REASON_UNDEFINED, "Execution completed successfully in 1m0s.")
	e.SucceededCount = 1
	return e
}

// Failed is an execution that failed with reason (NON_ZERO_EXIT_CODE when undefined).
func Failed(name string, at time.Time, reason runpb.Condition_ExecutionReason) *runpb.Execution {
	if reason == runpb.Condition_EXECUTION_REASON_UNDEFINED {
		reason = runpb.Condition_NON_ZERO_EXIT_CODE
	}
	e := completed(name, at, runpb.Condition_CONDITION_FAILED, reason, "Task 0 failed with message: The container exited with an error.")
	e.FailedCount = 1
	return e
}

// Cancelled is an execution an operator cancelled.
func Cancelled(name string, at time.Time) *runpb.Execution {
	e := completed(name, at, runpb.Condition_CONDITION_FAILED, runpb.Condition_CANCELLED, "The execution was cancelled.")
	e.CancelledCount = 1
	return e
}

// Cancelling is an execution whose cancellation is in progress.
func Cancelling(name string, at time.Time) *runpb.Execution {
	e := Running(name, at)
	e.Conditions[len(e.Conditions)-1] = completedCond(runpb.Condition_CONDITION_FAILED, runpb.Condition_CANCELLING,
		"The execution is being cancelled.", at)
	return e
}
