// Package functions holds stalesweep's Cloud Functions entry points, and nothing else: init
// registers the targets; each handler decodes its request or event, calls one workflow through
// the engine, and maps the result to a response or to nil/an error.
//
// Targets:
//
//	StartWorkflow (HTTP)       POST {"workflow_type", "initial_data"} → runs one scope inline,
//	                           returns the output; errors as {"error": {"code", "message", "details"}}
//	Sweep         (CloudEvent) a Pub/Sub message whose data is the same JSON → runs one scope
//
// Dependencies are built once per instance, lazily, from the environment (internal/app), and a
// failed build is retried on the next call.
package functions

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/logging"
)

func init() {
	functions.HTTP("StartWorkflow", StartWorkflow)
	functions.CloudEvent("Sweep", Sweep)
}

var log = logging.New(os.Stdout, logging.ParseLevel(os.Getenv(app.EnvLogLevel)))

var deps = app.NewLazy(func(ctx context.Context) (*app.App, error) {
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return app.New(ctx, cfg, log, time.Now)
})

// logger returns the package logger.
func logger() *slog.Logger { return log }
