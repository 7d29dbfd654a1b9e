// Package cloudrun is the Cloud Run executor adapter: it asks the Cloud Run Admin API v2
// Executions service about one execution and reduces the answer to an executor.Snapshot.
//
// What holds (the executor package's contract, which executortest checks against
// emulator/cloudrunfake):
//   - Every call has its own timeout (the generated client sets none for GetExecution) and
//     follows Config's executor.RetryPolicy; other errors keep their gRPC code.
//   - NotFound is a Snapshot with VerdictUnknown, not an error: Cloud Run keeps about 1,000
//     executions per job for about 7 days, so an old row's execution is usually aged out, not
//     failed.
package cloudrun

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// ExecutionGetter is the one call the adapter needs; *run.ExecutionsClient has it as is.
type ExecutionGetter interface {
	GetExecution(ctx context.Context, req *runpb.GetExecutionRequest, opts ...gax.CallOption) (*runpb.Execution, error)
}

// Config bounds the adapter's calls to Cloud Run, as every adapter's are bounded; its Policy is
// the retry policy they are made under. Zero values take the executor package's defaults.
type Config = executor.Config

// Adapter observes Cloud Run executions.
type Adapter struct {
	client ExecutionGetter
	policy executor.RetryPolicy
}

// New returns an adapter calling client.
func New(client ExecutionGetter, cfg Config) *Adapter {
	return &Adapter{client: client, policy: cfg.Policy()}
}

// RefKey is the provider_ref key that holds the execution's full resource name.
const RefKey = "execution"

var executionName = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/jobs/[^/]+/executions/[^/]+$`)

// Name returns the execution resource name a row's provider_ref names, and whether it is one.
func Name(ref map[string]any) (string, bool) {
	name, _ := ref[RefKey].(string)
	return name, executionName.MatchString(name)
}

// ValidRef reports whether a row's provider_ref names a Cloud Run execution.
func (a *Adapter) ValidRef(ref map[string]any) bool {
	_, ok := Name(ref)
	return ok
}

// Target is the project and region of the execution ref names: "cloud_run:projects/P/locations/L".
func (a *Adapter) Target(ref map[string]any) string {
	name, ok := Name(ref)
	if !ok {
		return ""
	}
	parts := strings.SplitN(name, "/", 5) // projects, P, locations, L, rest
	return "cloud_run:" + strings.Join(parts[:4], "/")
}

// Observe asks Cloud Run about the execution ref names.
func (a *Adapter) Observe(ctx context.Context, ref map[string]any) (executor.Snapshot, error) {
	name, ok := Name(ref)
	if !ok {
		return executor.Snapshot{}, status.Errorf(codes.InvalidArgument, "provider_ref.%s %q is not an execution name", RefKey, name)
	}
	req := &runpb.GetExecutionRequest{Name: name}
	var snap executor.Snapshot
	attempts, err := a.policy.Do(ctx, status.Code, func(ctx context.Context) error {
		e, err := a.client.GetExecution(ctx, req)
		switch {
		case err == nil:
			snap = Classify(e)
		case status.Code(err) == codes.NotFound:
			snap = executor.Snapshot{
				Verdict:  executor.VerdictUnknown,
				Evidence: map[string]any{"source": "cloud_run", "execution": name, "error": "NotFound"},
			}
		default:
			return err
		}
		return nil
	})
	switch {
	case err == nil:
		return snap, nil
	case ctx.Err() != nil:
		return executor.Snapshot{}, fmt.Errorf("get execution %s: %w", name, ctx.Err())
	default:
		return executor.Snapshot{}, fmt.Errorf("get execution %s (attempt %d): %w", name, attempts, err)
	}
}
