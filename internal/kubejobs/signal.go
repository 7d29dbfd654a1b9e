package kubejobs

import (
	"github.com/stalesweep/stalesweep/internal/logentry"
)

// endReasons are the reasons of the events the Job controller records when a Job ends
// (SuccessCriteriaMet and FailureTarget from Kubernetes 1.31). GKE exports events to Cloud
// Logging without a promise that every one arrives: an entry is only a hint.
var endReasons = []string{"Completed", "BackoffLimitExceeded", "DeadlineExceeded", "SuccessCriteriaMet", "FailureTarget"}

// Signal is Kubernetes' completion signal: a GKE cluster's event that a Job ended. The program
// sets its Provider where it pairs the adapter with its workflow.
var Signal = logentry.Signal{
	Filter: logentry.Filter{
		LogID:        "events",
		ResourceType: "k8s_cluster",
		Clauses: []logentry.Clause{
			{Path: "jsonPayload.involvedObject.kind", Values: []string{"Job"}},
			{Path: "jsonPayload.reason", Values: endReasons},
		},
	},
	Read: readEnd,
}

// RefUID is the provider_ref field a Job's row is found by: its uid names one Job object on
// every cluster, where its name may be reused.
const RefUID = "uid"

// readEnd names the Job an event is about by its uid. The row's own cluster, namespace and name
// are the ones asked; the event's are only logged.
func readEnd(e logentry.Entry) (logentry.Hint, error) {
	uid := e.Get("jsonPayload.involvedObject.uid")
	said := e.Get("jsonPayload.reason") + " " + e.Get("resource.labels.cluster_name") + "/" +
		e.Get("jsonPayload.involvedObject.namespace") + "/" + e.Get("jsonPayload.involvedObject.name")
	if uid == "" {
		return logentry.Hint{}, &logentry.Ignored{Reason: logentry.IgnoredNoName, Detail: "no involvedObject.uid: " + said}
	}
	return logentry.Hint{RefKey: RefUID, RefValues: []string{uid}, Said: said}, nil
}
