// Package functions holds stalesweep's Cloud Functions entry points, and nothing else: init
// registers the targets; each handler decodes its request or event, calls one piece of the
// pipeline, and maps the result to a response or to nil/an error.
//
// Targets:
//
//	Dispatch      (CloudEvent, stalesweep-ticks)  a tick → one sweep message per scope
//	Sweep         (CloudEvent, stalesweep-sweeps) a sweep message → one run on one scope,
//	                                              its syncs published to stalesweep-syncs
//	SyncExecution (CloudEvent, stalesweep-syncs)  a sync message → one row synced, exactly once
//	StartWorkflow (HTTP)                          POST {"workflow_type", "initial_data"} → one run
//	                                              on one scope, syncs inline, output returned
//
// Acknowledgement: a handler returns nil (acknowledged) for a message that could never succeed
// — malformed, invalid, a duplicate, a scope another run holds — after logging it, and an error
// only for a failure worth redelivering. Dependencies are built once per instance, lazily, from
// the environment (internal/app); a failed build is retried on the next call.
package functions

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/auth"
	"github.com/stalesweep/stalesweep/internal/logging"
)

func init() {
	functions.CloudEvent("Dispatch", Dispatch)
	functions.CloudEvent("Sweep", Sweep)
	functions.CloudEvent("SyncExecution", SyncExecution)
	functions.HTTP("StartWorkflow", StartWorkflow)
}

// Targets lists the registered targets, for the deployment's checks.
func Targets() []string { return []string{"Dispatch", "Sweep", "SyncExecution", "StartWorkflow"} }

// log is built on first use, so it follows the environment the process has by then.
var log = sync.OnceValue(func() *slog.Logger {
	return logging.New(os.Stdout, logging.ParseLevel(os.Getenv(app.EnvLogLevel)))
})

var deps = app.NewLazy(func(ctx context.Context) (*app.App, error) {
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return app.New(ctx, cfg, logger(), time.Now, app.Parts{Pipeline: true})
})

// verifier is built apart from deps: only the HTTP target needs it, and only it needs an
// audience configured.
var verifier = app.NewLazy(func(ctx context.Context) (*auth.Verifier, error) {
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	v, err := auth.New(ctx, cfg.Auth)
	if err != nil {
		return nil, err
	}
	if v.Disabled() {
		logger().Warn("authentication is OFF (STALESWEEP_AUTH=off): every caller may start workflows; for local use only")
	}
	return v, nil
})

// logger returns the package logger.
func logger() *slog.Logger { return log() }
