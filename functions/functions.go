// Package functions holds stalesweep's Cloud Functions entry points, and nothing else: init
// registers the targets; each handler decodes its request, calls one piece of the pipeline, and
// maps the result to a response (docs/architecture.md, "Functions and the gen2 build").
//
//	Dispatch      (Pub/Sub push, stalesweep-ticks)  a tick → one sweep message per scope
//	Sweep         (Pub/Sub push, stalesweep-sweeps) a sweep message → one run on one scope
//	SyncExecution (Pub/Sub push, stalesweep-syncs)  a sync message → one row synced, exactly once
//	ObserveExecution (Pub/Sub push, stalesweep-ends) a completion log entry → the rows it names settled
//	StartWorkflow (HTTP)                            one run on one scope, syncs inline
//
// Every target is registered with functions.HTTP: the framework's CloudEvent registration reads
// the whole request body before any code of ours runs. An event target answers 200 for a
// message that could never succeed, after logging it, and 500 only for a failure worth
// redelivering. Who started a run is what was verified: the caller's token on HTTP, the
// subscription ("pubsub:TOPIC") on Pub/Sub, since a push carries no proof of who published.
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
	functions.HTTP("Dispatch", Dispatch)
	functions.HTTP("Sweep", Sweep)
	functions.HTTP("SyncExecution", SyncExecution)
	functions.HTTP("ObserveExecution", ObserveExecution)
	functions.HTTP("StartWorkflow", StartWorkflow)
	if os.Getenv(app.EnvCloudRunService) != "" {
		if err := CheckEnv(os.Getenv); err != nil {
			logging.New(os.Stderr, slog.LevelInfo).Error("stalesweep cannot start: "+err.Error(), "function_target", os.Getenv("FUNCTION_TARGET"))
			os.Exit(2)
		}
	}
}

// CheckEnv checks the settings the targets this process serves read (FUNCTION_TARGET, or every
// target when it is unset), naming the variable of the first bad one.
func CheckEnv(getenv func(string) string) error {
	cfg, err := app.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	target := getenv("FUNCTION_TARGET")
	return cfg.Check(target == "" || target == "StartWorkflow")
}

// log is built on first use, so it follows the environment the process has by then.
var log = sync.OnceValue(func() *slog.Logger {
	return logging.New(os.Stdout, logging.ParseLevel(os.Getenv(app.EnvLogLevel)))
})

var deps = app.NewLazy(func(ctx context.Context) (*app.App, error) {
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return app.New(ctx, cfg, logger(), time.Now, app.Parts{})
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

func logger() *slog.Logger { return log() }
