package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithPubSub()) }

func TestDemoSettlesEveryCaseAndTouchesNothingElse(t *testing.T) {
	checkDemo(t, Options{LostGrace: time.Second, Pause: 100 * time.Millisecond})
}

func TestDemoThroughThePipelineSettlesTheSame(t *testing.T) {
	checkDemo(t, Options{LostGrace: time.Second, Pause: 100 * time.Millisecond, Pipeline: true})
}

func checkDemo(t *testing.T, o Options) {
	testenv.Need(t, testenv.FirestoreEmulator+" and the "+testenv.PubSubEmulator)
	var out bytes.Buffer
	o.Out = &out
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if res.Executions != 270 || len(res.Mismatches) != 0 {
		t.Errorf("executions %d, mismatches %v", res.Executions, res.Mismatches)
	}
	want := map[string]int{"succeeded": 60, "failed": 40, "cancelled": 20, "lost": 20}
	for k, v := range want {
		if res.Settled[k] != v {
			t.Errorf("settled %s = %d, want %d", k, res.Settled[k], v)
		}
	}
	if len(res.Settled) != len(want) {
		t.Errorf("settled = %v", res.Settled)
	}
	if !strings.Contains(out.String(), "every row ended as expected") {
		t.Errorf("summary missing:\n%s", out.String())
	}
}

func TestKindsCoverAtLeast200Executions(t *testing.T) {
	n := 0
	for _, k := range kinds() {
		n += k.Count
	}
	if n < 200 {
		t.Errorf("the demo organization has %d executions, want at least 200", n)
	}
}
