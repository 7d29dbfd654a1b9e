// Package logentrytest writes the Cloud Logging entries a log sink would publish when an
// execution ends, in the shapes internal/logentry's testdata samples say they come in: for the
// event path's tests, the local pipeline and the bench.
//
// Test tooling only: no product package imports it.
package logentrytest

import (
	"encoding/json"
	"strings"
	"time"
)

// CloudRunEnd is the System Event entry of Cloud Run execution name (projects/P/locations/L/
// jobs/J/executions/E) having ended, failed when failure is not empty, with insertID.
func CloudRunEnd(name, insertID, failure string, at time.Time) []byte {
	parts := strings.Split(name, "/")
	get := func(i int) string {
		if i < len(parts) {
			return parts[i]
		}
		return ""
	}
	status := map[string]any{}
	severity := "INFO"
	if failure != "" {
		status, severity = map[string]any{"code": 9, "message": failure}, "ERROR"
	}
	return mustJSON(map[string]any{
		"insertId": insertID,
		"logName":  "projects/" + get(1) + "/logs/cloudaudit.googleapis.com%2Fsystem_event",
		"protoPayload": map[string]any{
			"@type":        "type.googleapis.com/google.cloud.audit.AuditLog",
			"status":       status,
			"serviceName":  "run.googleapis.com",
			"methodName":   "/Jobs.RunJob",
			"resourceName": "namespaces/" + get(1) + "/executions/" + get(7),
		},
		"resource":  map[string]any{"type": "cloud_run_job", "labels": map[string]any{"job_name": get(5), "location": get(3), "project_id": get(1)}},
		"labels":    map[string]any{"run.googleapis.com/execution_name": get(7)},
		"timestamp": at.UTC().Format(time.RFC3339Nano),
		"severity":  severity,
	})
}

// JobEnd is a GKE cluster's event that Job namespace/name (uid) ended for reason.
func JobEnd(cluster, namespace, name, uid, reason, insertID string, at time.Time) []byte {
	return mustJSON(map[string]any{
		"insertId": insertID,
		"logName":  "projects/gke-project/logs/events",
		"jsonPayload": map[string]any{
			"apiVersion":     "v1",
			"kind":           "Event",
			"involvedObject": map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": namespace, "uid": uid},
			"reason":         reason,
			"type":           "Normal",
			"source":         map[string]any{"component": "job-controller"},
		},
		"resource":  map[string]any{"type": "k8s_cluster", "labels": map[string]any{"cluster_name": cluster, "location": "europe-west1", "project_id": "gke-project"}},
		"timestamp": at.UTC().Format(time.RFC3339Nano),
		"severity":  "INFO",
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
