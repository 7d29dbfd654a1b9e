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
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/retention"
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
		err = fmt.Errorf("no project: set --project or %s (or %s for the emulator)", app.EnvProject, firestoreconn.EmulatorEnv)
	}
	if err == nil {
		err = cfg.Check(false)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", prefix, err)
		return cfg, false
	}
	c.bound(name, cfg)
	return cfg, true
}

// commandBudgetFactor is how many STALESWEEP_FIRESTORE_TIMEOUTs a command may spend on
// Firestore in all: a command that reads or writes a few documents (runs, pauses, explain, orgs,
// executors) ends within it, a workflow run, gc and status within their own budgets more.
const commandBudgetFactor = 3

// commandBudget is how long the command called name may take, with the settings cfg.
func commandBudget(name string, cfg app.Config) time.Duration {
	budget := commandBudgetFactor * cfg.FirestoreTimeout
	switch name {
	case "run", "pm sweep":
		budget += cfg.RunBudget() // its record writes are bounded apart, each by cfg.FirestoreTimeout
	case "gc":
		budget += retention.BudgetDefault
	case "status":
		budget += StatusBudget
	}
	return budget
}

// bound gives the command its budget, from the settings it has just read: every call it makes
// from now on ends by then, whatever Firestore does (each call attempt is bounded by the
// connection too, but the client retries some calls that timed out until their context ends).
func (c *cli) bound(name string, cfg app.Config) {
	budget := commandBudget(name, cfg)
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithTimeoutCause(c.ctx, budget, &stalled{host: firestoreconn.Endpoint(), budget: budget})
	c.cancels = append(c.cancels, cancel)
}

// stalled says why a command that failed got no answer: Firestore stopped answering, a call
// waited its whole STALESWEEP_FIRESTORE_TIMEOUT, or the command spent its whole budget.
type stalled struct {
	host   string
	call   time.Duration // the bound a call waited out, or zero
	budget time.Duration // the command's budget, when it was spent
}

func (s *stalled) Error() string {
	if s.budget > 0 {
		return fmt.Sprintf("Firestore at %s stopped answering: the command's budget of %s is spent", s.host, s.budget)
	}
	return fmt.Sprintf("Firestore at %s stopped answering: a call got no answer within %s (%s)", s.host, s.call, app.EnvFirestoreTimeout)
}

// firestoreDial bounds every call of a command's Firestore connection (callTimeout) and
// notes the first that waited out its bound, for the message a failed command ends with.
func (c *cli) firestoreDial(cfg app.Config, more ...grpc.DialOption) []grpc.DialOption {
	d := cfg.FirestoreTimeout
	noted := func() { c.stall.CompareAndSwap(nil, &stalled{host: firestoreconn.Endpoint(), call: d}) }
	return append(callTimeout(d, noted), more...)
}

// openFirestore opens the configured Firestore alone (no executor, no Pub/Sub) for a command
// that only reads or writes stalesweep's own documents, and reads one document to learn that it
// answers; nil and the exit code when it cannot (said on stderr).
func (c *cli) openFirestore(name, project string) (*firestore.Client, app.Config, int) {
	cfg, ok := c.config(name, project)
	if !ok {
		return nil, cfg, exitInvalid
	}
	o := firestoreconn.Options{Project: cfg.Project, Database: cfg.Database, DialOptions: c.firestoreDial(cfg)}
	fsc, err := firestoreconn.Open(c.ctx, o)
	if err == nil {
		if err = firestoreconn.Ping(c.ctx, fsc, o, cfg.FirestoreTimeout); err != nil {
			fsc.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "stalesweep %s: %v\n", name, err)
		return nil, cfg, exitFailed
	}
	c.reached = true
	return fsc, cfg, exitOK
}

// withFirestore runs body with openFirestore's client, under the command's budget (bound).
func (c *cli) withFirestore(name, project string, body func(context.Context, *firestore.Client, app.Config) int) error {
	fsc, cfg, code := c.openFirestore(name, project)
	if fsc == nil {
		return exitCode(code)
	}
	defer fsc.Close()
	return exit(body(c.ctx, fsc, cfg))
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
	a, err := app.New(c.ctx, cfg, log, time.Now, app.Parts{FirestoreDialOptions: c.firestoreDial(cfg, more...)})
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", strings.TrimSpace("stalesweep "+name), err)
		return nil, exitFailed
	}
	c.reached = true
	return a, exitOK
}
