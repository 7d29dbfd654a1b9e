package logentry_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
)

func signals() []logentry.Signal {
	run, kube := cloudrun.Signal, kubejobs.Signal
	run.Provider, kube.Provider = ledger.ProviderCloudRun, ledger.ProviderKubernetes
	return []logentry.Signal{run, kube}
}

// Each sample under testdata is a LogEntry (entry.json) with what reading it must give (want:
// "provider P" and one "ref KEY=VALUE" per value looked up, or "ignored REASON"); the archive's
// comment says where the sample's shape comes from.
func TestSamplesReadAsTheySay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) < 15 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parts := map[string]string{}
			for _, file := range a.Files {
				parts[file.Name] = string(file.Data)
			}
			if len(strings.TrimSpace(string(a.Comment))) == 0 || parts["entry.json"] == "" || parts["want"] == "" {
				t.Fatalf("a sample needs a comment saying its source, entry.json and want")
			}
			h, err := logentry.Read([]byte(parts["entry.json"]), signals()...)
			if got, want := describe(h, err), strings.TrimSpace(parts["want"]); got != want {
				t.Errorf("read:\n%s\nwant:\n%s", got, want)
			}
			if err == nil && h.InsertID == "" {
				t.Error("a hint without the entry's insertId")
			}
			// What is read at all is what a sink's filter lets through, and no more.
			var ig *logentry.Ignored
			unmatched := errors.As(err, &ig) && (ig.Reason == logentry.IgnoredUnmatched || ig.Reason == logentry.IgnoredUnreadable)
			if e, derr := logentry.Decode([]byte(parts["entry.json"])); derr == nil {
				matched := 0
				for _, s := range signals() {
					if s.Filter.Match(e) {
						matched++
					}
				}
				if matched > 1 || (matched == 0) != unmatched {
					t.Errorf("%d filters match the sample, read as %v", matched, err)
				}
			}
		})
	}
}

func describe(h logentry.Hint, err error) string {
	var ig *logentry.Ignored
	if errors.As(err, &ig) {
		return "ignored " + ig.Reason
	}
	if err != nil {
		return "error " + err.Error()
	}
	lines := []string{"provider " + h.Provider}
	for _, v := range h.RefValues {
		lines = append(lines, "ref "+h.RefKey+"="+v)
	}
	return strings.Join(lines, "\n")
}

// The filters as a sink takes them, to the byte: Terraform is generated from these strings.
func TestFiltersAreTheQueriesASinkTakes(t *testing.T) {
	if got, want := cloudrun.Signal.Filter.String(), `log_id("cloudaudit.googleapis.com/system_event") AND resource.type="cloud_run_job" AND `+
		`protoPayload.serviceName="run.googleapis.com" AND (protoPayload.methodName="/Jobs.RunJob" OR `+
		`protoPayload.methodName="google.cloud.run.v2.Jobs.RunJob" OR protoPayload.methodName="/Executions.CancelExecution" OR `+
		`protoPayload.methodName="google.cloud.run.v2.Executions.CancelExecution")`; got != want {
		t.Errorf("Cloud Run filter:\n%s\nwant\n%s", got, want)
	}
	if got, want := kubejobs.Signal.Filter.String(), `log_id("events") AND resource.type="k8s_cluster" AND jsonPayload.involvedObject.kind="Job" AND `+
		`(jsonPayload.reason="Completed" OR jsonPayload.reason="BackoffLimitExceeded" OR jsonPayload.reason="DeadlineExceeded" OR `+
		`jsonPayload.reason="SuccessCriteriaMet" OR jsonPayload.reason="FailureTarget")`; got != want {
		t.Errorf("Kubernetes filter:\n%s\nwant\n%s", got, want)
	}
}

// A label key holds dots and a slash; a path finds it as one key.
func TestGetFindsKeysThatHoldDots(t *testing.T) {
	e, err := logentry.Decode([]byte(`{"labels": {"run.googleapis.com/execution_name": "x-1", "run": {"googleapis": "no"}},
		"logName": "organizations/12/logs/cloudaudit.googleapis.com%2Fsystem_event", "a": {"b": {"c": "deep"}, "n": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"labels.run.googleapis.com/execution_name": "x-1",
		"a.b.c": "deep", "a.n": "", "a.b": "", "a.missing": "", "missing.b": "",
	} {
		if got := e.Get(path); got != want {
			t.Errorf("Get(%q) = %q, want %q", path, got, want)
		}
	}
	if got := e.LogID(); got != "cloudaudit.googleapis.com/system_event" {
		t.Errorf("LogID = %q", got)
	}
}
