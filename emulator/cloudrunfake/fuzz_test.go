package cloudrunfake_test

import (
	"bytes"
	"strings"
	"testing"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/protobuf/proto"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executor"
)

// FuzzLoadExecutions holds the executions file (`stalesweep fake-cloudrun --executions`) to what
// an operator's file deserves. LoadExecutions returns plain errors by design — the file is
// operator configuration read once at start, not a request with a contract — so the property
// is: no panic; a rejection names the file's content ("executions", with the element's index
// where there is one); an accepted file holds only executions the fake can serve (SetExecution
// takes each), classifies each without panicking into a verdict the syncer knows, and reads
// back unchanged from its own encoding (MarshalExecutions).
func FuzzLoadExecutions(f *testing.F) {
	name := cloudrunfake.ExecutionName("p", "l", "j", "a")
	good, err := cloudrunfake.MarshalExecutions([]*runpb.Execution{
		cloudrunfake.Succeeded(name, at), cloudrunfake.Failed(cloudrunfake.ExecutionName("p", "l", "j", "b"), at, 0),
		cloudrunfake.Cancelling(cloudrunfake.ExecutionName("p", "l", "j", "c"), at),
		cloudrunfake.Running(cloudrunfake.ExecutionName("p", "l", "j", "d"), at),
		cloudrunfake.Pending(cloudrunfake.ExecutionName("p", "l", "j", "e"), at),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, s := range []string{
		`[]`, `null`, `{}`, `not json`, ``, `[{}]`, `[null]`, `[1]`,
		`[{"name": "` + name + `"}]`,
		`[{"name": "` + name + `", "task_count": 1, "reconciling": true,
		  "conditions": [{"type": "Completed", "state": "CONDITION_FAILED", "executionReason": "CANCELLED", "lastTransitionTime": "2026-11-29T08:00:00Z"}]}]`,
		`[{"name": "` + name + `", "conditions": [{"type": "Completed", "state": 99, "reason": "ROUTE_MISSING"}]}]`,
		`[{"name": "` + name + `", "completionTime": "2026-13-29T08:00:00Z"}]`,
		`[{"name": "` + name + `", "taskCount": -1, "succeededCount": 2147483648}]`,
		`[{"name": "projects/p/locations/l/jobs/j/executions/"}]`,
		`[{"name": "projects/p/locations/l/jobs/j/executions/a/b"}]`,
		`[{"name": 3}]`, `[{"conditions": "x"}]`, `[{"name": "` + name + `", "nope": 1}]`,
	} {
		f.Add([]byte(s))
	}
	srv, err := cloudrunfake.NewServer() // one per fuzzing process; SetExecution needs no client
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Close)
	known := []executor.Verdict{executor.VerdictRunning, executor.VerdictSucceeded, executor.VerdictFailed,
		executor.VerdictCancelled, executor.VerdictUnknown}
	f.Fuzz(func(t *testing.T, raw []byte) {
		execs, err := cloudrunfake.LoadExecutions(bytes.NewReader(raw))
		if err != nil {
			if !strings.Contains(err.Error(), "executions") {
				t.Fatalf("LoadExecutions(%q): error %q does not name the executions", raw, err)
			}
			return
		}
		for i, e := range execs {
			if err := srv.SetExecution(e); err != nil {
				t.Fatalf("executions[%d] was loaded but the fake refuses it: %v", i, err)
			}
			if v := cloudrun.Classify(e).Verdict; !contains(known, v) {
				t.Fatalf("executions[%d] classifies as %q, a verdict the syncer does not know", i, v)
			}
		}
		b, err := cloudrunfake.MarshalExecutions(execs)
		if err != nil {
			t.Fatalf("loaded executions do not marshal again: %v", err)
		}
		again, err := cloudrunfake.LoadExecutions(bytes.NewReader(b))
		if err != nil || len(again) != len(execs) {
			t.Fatalf("loaded executions do not load again from %s: %v", b, err)
		}
		for i := range execs {
			if !proto.Equal(again[i], execs[i]) {
				t.Fatalf("executions[%d] changed in a round trip:\n%v\n%v", i, execs[i], again[i])
			}
		}
	})
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
