package kubejobs

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Fixtures of Jobs in the states the Job controller leaves them in. The fake clientset accepts
// any status; the real API server (1.32+) does not, so every fixture must pass serverRules.

var (
	started  = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	finished = started.Add(7 * time.Minute)
)

func job(name string, mod func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "runners", UID: types.UID("uid-" + name), ResourceVersion: "7"},
		Status:     batchv1.JobStatus{StartTime: &metav1.Time{Time: started}},
	}
	if mod != nil {
		mod(j)
	}
	return j
}

func cond(t batchv1.JobConditionType, reason, msg string, at time.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.Time{Time: at}}
}

func ptr[T any](v T) *T { return &v }

func runningJob(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) { j.Status.Active = 1; j.Status.Ready = ptr(int32(1)) })
}

func succeededJob(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &metav1.Time{Time: finished}
		j.Status.Conditions = []batchv1.JobCondition{
			cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", finished.Add(-time.Second)),
			cond(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", finished),
		}
	})
}

func failedJob(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) {
		j.Status.Failed = 3
		j.Status.Conditions = []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit", finished.Add(-time.Second)),
			cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit", finished),
		}
	})
}

func finishingSuccess(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) {
		j.Status.Succeeded, j.Status.Terminating = 1, ptr(int32(1))
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "", finished)}
	})
}

func finishingFailure(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) {
		j.Status.Failed, j.Status.Terminating = 1, ptr(int32(2))
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "DeadlineExceeded", "Job was active longer than specified deadline", finished)}
	})
}

func suspendedJob(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) {
		j.Spec.Suspend = ptr(true)
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuspended, "JobSuspended", "Job suspended", finished)}
	})
}

// retryingJob has failed pods and a live one: counters alone would say "failed".
func retryingJob(name string) *batchv1.Job {
	return job(name, func(j *batchv1.Job) { j.Status.Failed, j.Status.Active = 2, 1 })
}

// serverRules checks a Job status as the API server's validation does for the conditions the
// classifier reads.
func serverRules(j *batchv1.Job) error {
	has := map[batchv1.JobConditionType]bool{}
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			has[c.Type] = true
		}
	}
	switch {
	case has[batchv1.JobFailed] && !has[batchv1.JobFailureTarget]:
		return fmt.Errorf("Failed=True without FailureTarget=True")
	case has[batchv1.JobComplete] && (!has[batchv1.JobSuccessCriteriaMet] || j.Status.CompletionTime == nil):
		return fmt.Errorf("Complete=True without SuccessCriteriaMet=True and completionTime")
	case j.Status.CompletionTime != nil && !has[batchv1.JobComplete]:
		return fmt.Errorf("completionTime without Complete=True")
	case has[batchv1.JobComplete] && has[batchv1.JobFailed]:
		return fmt.Errorf("Complete and Failed together")
	}
	return nil
}

var (
	metaCreate = metav1.CreateOptions{}
	metaUpdate = metav1.UpdateOptions{}
)
