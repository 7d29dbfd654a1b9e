package localpipeline

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// The local script is what the operations guide tells people to run; CI runs it too, in its
// check mode: a tick published with gcloud must settle a stale row through the whole chain.
func TestLocalPipelineScriptSettlesARowThroughTheWholeChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "../local-pipeline.sh", "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("local-pipeline.sh --check: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
