package sweeptest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Probe fails t unless def's probe, asked at now about the one scope input (its Input, as JSON)
// names, answers want without an error.
func Probe(t *testing.T, def workflow.Definition, input any, now time.Time, want bool) {
	t.Helper()
	in, _ := json.Marshal(input)
	got, err := def.Probe(context.Background(), []json.RawMessage{in}, now)
	if err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("probe = %v, %v; want [%v]", got, err, want)
	}
}
