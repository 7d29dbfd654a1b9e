package kubejobs

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// Classify reduces a batch/v1 Job to a verdict as Kubernetes decides (docs/architecture.md); it
// is pure. completionTime is set only on success, so a failed Job finished at its condition's
// time; counters never decide, since a failed pod may be retried.
func Classify(job *batchv1.Job) executor.Snapshot {
	snap := executor.Snapshot{Verdict: executor.VerdictRunning, Evidence: Evidence(job)}
	var complete, failed, successMet, failureTarget *batchv1.JobCondition
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			complete = c
		case batchv1.JobFailed:
			failed = c
		case batchv1.JobSuccessCriteriaMet:
			successMet = c
		case batchv1.JobFailureTarget:
			failureTarget = c
		}
	}
	switch {
	case failed != nil:
		snap.Verdict = executor.VerdictFailed
		snap.FinishedAt = failed.LastTransitionTime.Time
		snap.Reason = reason(failed)
	case complete != nil:
		snap.Verdict = executor.VerdictSucceeded
		if t := job.Status.CompletionTime; t != nil {
			snap.FinishedAt = t.Time
		} else {
			snap.FinishedAt = complete.LastTransitionTime.Time
		}
	case failureTarget != nil:
		snap.Pending = executor.VerdictFailed
		snap.Reason = reason(failureTarget)
	case successMet != nil:
		snap.Pending = executor.VerdictSucceeded
	}
	return snap
}

func reason(c *batchv1.JobCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return c.Reason + ": " + c.Message
	case c.Reason != "":
		return c.Reason
	default:
		return c.Message
	}
}

// Evidence is the part of a Job a settlement keeps.
func Evidence(job *batchv1.Job) map[string]any {
	conds := make([]any, 0, len(job.Status.Conditions))
	for _, c := range job.Status.Conditions {
		m := map[string]any{"type": string(c.Type), "status": string(c.Status)}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		if !c.LastTransitionTime.IsZero() {
			m["last_transition_time"] = c.LastTransitionTime.Time
		}
		conds = append(conds, m)
	}
	ev := map[string]any{
		"source":           "kubernetes",
		"namespace":        job.Namespace,
		"job":              job.Name,
		"uid":              string(job.UID),
		"resource_version": job.ResourceVersion,
		"conditions":       conds,
		"active":           int64(job.Status.Active),
		"succeeded":        int64(job.Status.Succeeded),
		"failed":           int64(job.Status.Failed),
	}
	if job.Status.Terminating != nil {
		ev["terminating"] = int64(*job.Status.Terminating)
	}
	if job.Status.Ready != nil {
		ev["ready"] = int64(*job.Status.Ready)
	}
	if t := job.Status.StartTime; t != nil {
		ev["start_time"] = t.Time
	}
	if t := job.Status.CompletionTime; t != nil {
		ev["completion_time"] = t.Time
	}
	if job.Spec.Suspend != nil && *job.Spec.Suspend {
		ev["suspended"] = true
	}
	return ev
}
