package cloudrun

import (
	"regexp"
	"slices"
	"strings"

	"github.com/stalesweep/stalesweep/internal/logentry"
)

// The methods of the System Event audit entries Cloud Run is reported to write when a job
// execution ends (/Jobs.RunJob, in the v1 and the v2 spelling) or is cancelled. Google's
// audit-logging page lists none of them, so the shape is unconfirmed: an entry is only a hint.
var endMethods = []string{
	"/Jobs.RunJob",
	"google.cloud.run.v2.Jobs.RunJob",
	"/Executions.CancelExecution",
	"google.cloud.run.v2.Executions.CancelExecution",
}

// ExecutionLabel is the entry label that names the execution, beside resource.labels.
const ExecutionLabel = "run.googleapis.com/execution_name"

// Signal is Cloud Run's completion signal: the System Event entry of a job execution that ended.
// The program sets its Provider where it pairs the adapter with its workflow.
var Signal = logentry.Signal{
	Filter: logentry.Filter{
		LogID:        "cloudaudit.googleapis.com/system_event",
		ResourceType: "cloud_run_job",
		Clauses: []logentry.Clause{
			{Path: "protoPayload.serviceName", Values: []string{"run.googleapis.com"}},
			{Path: "protoPayload.methodName", Values: endMethods},
		},
	},
	Read: readEnd,
}

var (
	v1Name = regexp.MustCompile(`^namespaces/([^/]+)/executions/([^/]+)$`)
	v2Name = regexp.MustCompile(`^projects/([^/]+)/locations/([^/]+)/jobs/([^/]+)/executions/([^/]+)$`)
)

// readEnd names the execution an end entry is about, as a row's provider_ref.execution names it
// (projects/P/locations/L/jobs/J/executions/E): from a v2 resourceName as it is, else from the
// resource's labels and the execution's name (the entry's label, or a v1 resourceName's last
// part). A v1 name's namespace is the project's number or id; a row may name it either way.
func readEnd(e logentry.Entry) (logentry.Hint, error) {
	h := logentry.Hint{RefKey: RefKey, Said: e.Get("protoPayload.methodName")}
	if msg := e.Get("protoPayload.status.message"); msg != "" {
		h.Said += ": " + msg
	}
	resource := e.Get("protoPayload.resourceName")
	if v2Name.MatchString(resource) {
		h.RefValues = []string{resource}
		return h, nil
	}
	project, location, job := e.Get("resource.labels.project_id"), e.Get("resource.labels.location"), e.Get("resource.labels.job_name")
	execution, namespace := e.Get("labels."+ExecutionLabel), ""
	if m := v1Name.FindStringSubmatch(resource); m != nil {
		namespace = m[1]
		if execution == "" {
			execution = m[2]
		}
	}
	for _, p := range []string{project, namespace} {
		name := strings.Join([]string{"projects", p, "locations", location, "jobs", job, "executions", execution}, "/")
		if p != "" && executionName.MatchString(name) && !slices.Contains(h.RefValues, name) {
			h.RefValues = append(h.RefValues, name)
		}
	}
	if len(h.RefValues) == 0 {
		return logentry.Hint{}, &logentry.Ignored{Reason: logentry.IgnoredNoName,
			Detail: "resourceName " + resource + ", labels " + project + "/" + location + "/" + job + "/" + execution}
	}
	return h, nil
}
