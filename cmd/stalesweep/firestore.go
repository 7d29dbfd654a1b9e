package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
)

// Every command reaches Firestore through this file: the settings are read and checked first (a
// bad one exits 2 before anything is dialled), then the client is opened on a connection that
// bounds each call by STALESWEEP_FIRESTORE_TIMEOUT, and one read of a document that need not
// exist, under the same bound, tells an unreachable or refusing Firestore (exit 1, saying where)
// from a working one before the command does anything.

// config is the configuration from the environment, with project (when set) in place of
// $GOOGLE_CLOUD_PROJECT, checked as far as it can be without the network; false when a setting
// is bad (said on stderr, naming it).
func (c *cli) config(name, project string) (app.Config, bool) {
	prefix := strings.TrimSpace("stalesweep " + name)
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err == nil && project != "" {
		cfg.Project = project
	}
	if err == nil && cfg.Project == "" {
		err = fmt.Errorf("no project: set --project or %s (or %s for the emulator)", app.EnvProject, ledger.EmulatorEnv)
	}
	if err == nil {
		err = cfg.Check(false)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", prefix, err)
		return cfg, false
	}
	return cfg, true
}

// firestoreDial bounds every call of a command's Firestore connection (ledger.CallTimeout).
func firestoreDial(cfg app.Config, more ...grpc.DialOption) []grpc.DialOption {
	return append(ledger.CallTimeout(cfg.FirestoreTimeout), more...)
}

// openFirestore opens the configured Firestore alone (no executor, no Pub/Sub) for a command
// that only reads or writes stalesweep's own documents, and reads one document to learn that it
// answers; nil and the exit code when it cannot (said on stderr).
func (c *cli) openFirestore(name, project string) (*firestore.Client, app.Config, int) {
	cfg, ok := c.config(name, project)
	if !ok {
		return nil, cfg, exitInvalid
	}
	o := ledger.Options{Project: cfg.Project, Database: cfg.Database, DialOptions: firestoreDial(cfg)}
	fsc, err := ledger.Open(c.ctx, o)
	if err == nil {
		if err = ledger.Ping(c.ctx, fsc, o, cfg.FirestoreTimeout); err != nil {
			fsc.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
		return nil, cfg, exitFailed
	}
	return fsc, cfg, exitOK
}

// withFirestore runs body with openFirestore's client under a 30-second budget.
func (c *cli) withFirestore(name, project string, body func(context.Context, *firestore.Client, app.Config) int) error {
	fsc, cfg, code := c.openFirestore(name, project)
	if fsc == nil {
		return exitCode(code)
	}
	defer fsc.Close()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	return exit(body(ctx, fsc, cfg))
}

// openApp builds the process's dependencies from the environment, as the run command does;
// nil and the exit code when it cannot (said on stderr).
func (c *cli) openApp(name, project string) (*app.App, int) {
	return c.openAppLogging(name, project, false)
}

// openAppLogging is openApp whose log, when human, is plain text at WARN and worse (humanLog)
// instead of Cloud Logging's JSON.
func (c *cli) openAppLogging(name, project string, human bool) (*app.App, int) {
	cfg, ok := c.config(name, project)
	if !ok {
		return nil, exitInvalid
	}
	log := logging.New(c.stderr, logging.ParseLevel(cfg.LogLevel))
	if human {
		log = humanLog(c.stderr, logging.ParseLevel(cfg.LogLevel))
	}
	return c.newApp(name, cfg, log)
}

// newApp is app.New on the command's bounded Firestore connection (more are further dial
// options); nil and the exit code when it cannot (said on stderr).
func (c *cli) newApp(name string, cfg app.Config, log *slog.Logger, more ...grpc.DialOption) (*app.App, int) {
	a, err := app.New(c.ctx, cfg, log, time.Now, app.Parts{FirestoreDialOptions: firestoreDial(cfg, more...)})
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", strings.TrimSpace("stalesweep "+name), err)
		return nil, exitFailed
	}
	return a, exitOK
}
