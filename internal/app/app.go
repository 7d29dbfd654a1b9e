// Package app builds, once per process, the dependencies every face of stalesweep shares (the
// Firestore and Pub/Sub clients, the executor clients, the workflow engines, the dispatcher)
// from a Config, and closes them.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// SyncBudgetDefault bounds one SyncExecution call.
const SyncBudgetDefault = 60 * time.Second

// Parts says how to build the parts.
type Parts struct {
	// FirestoreDialOptions are added to the Firestore connection: tests watch it with them
	// (internal/testkit/fsspy).
	FirestoreDialOptions []grpc.DialOption
}

// App is one process's dependencies. Firestore, the executors and the inline engine are built by
// New; the Pub/Sub side (the pipeline engine and the dispatcher) only when a target first asks
// for it, so StartWorkflow and SyncExecution need neither Pub/Sub nor its credentials.
type App struct {
	Config    Config
	Firestore *firestore.Client
	Log       *slog.Logger

	// Engine runs workflows with their syncs inline: the HTTP face and the command.
	Engine *workflow.Engine
	// Syncers sync one row of a sync message, by the row's provider.
	Syncers map[string]*executionsync.Syncer
	// ExecutionSyncs are the execution-sync workflows, by the provider of the rows they sync.
	ExecutionSyncs map[string]*executionsync.Workflow
	// Explainers explain a row of a collection (Explained), each by the workflow that settles it.
	Explainers map[string]Explainer
	// Observer settles the rows the executors' completion entries name: ObserveExecution.
	Observer *executionsync.Observer

	signals []logentry.Signal // of the executors this build syncs

	pipeline *Lazy[*Pipeline]
	mu       sync.Mutex
	closers  []func() error
}

// Pipeline is the Pub/Sub side of the pipeline.
type Pipeline struct {
	// Engine runs workflows whose syncs go to the syncs topic: the Sweep function.
	Engine *workflow.Engine
	// Dispatcher fans a tick out to the sweeps topic.
	Dispatcher *pipeline.Dispatcher
}

// New builds an App. now is the clock every workflow uses. It reads one document to learn that
// Firestore answers, and says where it looked when it does not.
func New(ctx context.Context, cfg Config, log *slog.Logger, now func() time.Time, parts Parts) (_ *App, err error) {
	a := &App{Config: cfg, Log: log, Syncers: map[string]*executionsync.Syncer{}, ExecutionSyncs: map[string]*executionsync.Workflow{},
		Explainers: map[string]Explainer{}}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	fsOpts := firestoreconn.Options{Project: cfg.Project, Database: cfg.Database, DialOptions: parts.FirestoreDialOptions}
	a.Firestore, err = firestoreconn.Open(ctx, fsOpts)
	if err != nil {
		return nil, err
	}
	a.onClose(a.Firestore.Close)
	if err := firestoreconn.Ping(ctx, a.Firestore, fsOpts, cmp.Or(cfg.FirestoreTimeout, FirestoreTimeoutDefault)); err != nil {
		return nil, err
	}

	if cfg.CloudRunEndpoint != "" {
		if err := cloudrun.RequireLoopback(cfg.CloudRunEndpoint); err != nil {
			return nil, fmt.Errorf("%s: %w", cloudrun.EndpointEnv, err)
		}
	}
	runClient := cloudrun.NewLazy(cfg.CloudRunEndpoint)
	a.onClose(runClient.Close)

	syncCfg := cfg.Sync
	syncCfg.Budget = cfg.budget()
	syncCfg = syncCfg.WithDefaults()
	sh := shared{app: a, fs: a.Firestore, now: now, log: log, run: runClient, sync: syncCfg,
		store: ledger.NewExecutionStore(a.Firestore, cfg.Tx, cfg.Retention),
		blind: blindguard.New(targetstore.New(a.Firestore, cfg.Retention), cfg.Blind, log),
	}
	var builts []*built
	for _, w := range workflows {
		s := sh
		s.cfg = cfg
		if w.bounds != nil {
			b := w.bounds(&s.cfg)
			b.Budget = cfg.within(b.Budget, agesweep.BudgetDefault)
			if w.AgeBased {
				b.Storm = cfg.Storm
			}
		} else if w.AgeBased {
			return nil, fmt.Errorf("workflow %s settles on age alone but declares no storm guard", w.Type)
		}
		b, err := w.build(s)
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue
		}
		builts = append(builts, b)
		if w.explains != "" {
			a.Explainers[w.explains] = b.explain
		}
	}
	a.Observer = executionsync.NewObserver(executionsync.ObserverConfig{Rows: sh.store, Signals: a.signals, Syncers: a.Syncers, Log: log, Now: now})
	// Each workflow on one engine: its syncs inline, or (with the pipeline) published.
	definitions := func(starter func(*executionsync.Syncer) executionsync.Starter) ([]workflow.Definition, error) {
		defs := make([]workflow.Definition, len(builts))
		for i, b := range builts {
			var err error
			if defs[i], err = b.definition(starter); err != nil {
				return nil, err
			}
		}
		return defs, nil
	}

	orgs := orgadmin.New(a.Firestore)
	pauses := pausestore.New(a.Firestore)
	engineOpts := workflow.Options{
		Runs:       runstore.New(a.Firestore),
		Guards:     runstore.NewGuardStore(a.Firestore),
		GuardTTL:   syncCfg.Budget + 2*time.Minute,
		GuardLease: workflow.GuardLeaseDefault,
		Orgs:       orgs,
		Pauses:     pauses,
		Retention:  cfg.Retention,
		// A record write is a Firestore call like any other: a store that is gone fails it within
		// the same bound, so a run stopped by the store breaker exits in seconds.
		RecordTimeout: cfg.FirestoreTimeout,
		Now:           now,
		Log:           log,
	}
	inline, err := definitions(func(s *executionsync.Syncer) executionsync.Starter {
		return &executionsync.Inline{Syncer: s, Concurrency: syncCfg.Concurrency}
	})
	if err != nil {
		return nil, err
	}
	a.Engine = workflow.NewEngine(engineOpts, inline...)

	a.pipeline = NewLazy(func(ctx context.Context) (*Pipeline, error) {
		ps, err := pubsub.NewClient(ctx, cfg.Project)
		if err != nil {
			return nil, fmt.Errorf("open pubsub: %w", err)
		}
		a.onClose(ps.Close)
		publisher := pipeline.NewTopicPublisher(ps, 0, 0)
		a.onClose(func() error { publisher.Stop(); return nil })
		fanout, err := definitions(func(*executionsync.Syncer) executionsync.Starter {
			return &pipeline.SyncStarter{Publisher: publisher, Topic: cfg.Topics.Syncs}
		})
		if err != nil {
			return nil, err
		}
		dispatch := cfg.Dispatch
		dispatch.Budget = cfg.within(dispatch.Budget, pipeline.BudgetDefault)
		engine := workflow.NewEngine(engineOpts, fanout...)
		o := pipeline.DispatcherOptions{
			Orgs: orgs, Publisher: publisher, SweepsTopic: cfg.Topics.Sweeps, Workflows: engine, Log: log, Config: dispatch,
			ListQueues: ledger.NewTaskStore(a.Firestore, cfg.Tx).ListQueues,
			ListGroups: ledger.NewLeaseStore(a.Firestore, cfg.Tx).ListGroups,
			Pauses:     pauses,
			Probe:      firestoreconn.ServerClock(a.Firestore),
			TicksTopic: cfg.Topics.Ticks,
		}
		if cfg.RosterMaxAge >= 0 {
			o.Roster, o.RosterMaxAge = rosterstore.New(a.Firestore, cfg.Retention, now), cfg.RosterMaxAge
		}
		return &Pipeline{Engine: engine, Dispatcher: pipeline.NewDispatcher(o)}, nil
	})
	return a, nil
}

// Pipeline returns the Pub/Sub side, building it on first use (Lazy).
func (a *App) Pipeline(ctx context.Context) (*Pipeline, error) { return a.pipeline.Get(ctx) }

func (a *App) onClose(f func() error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closers = append(a.closers, f)
}

// SyncBudget is how long one SyncExecution or ObserveExecution call may take.
func (a *App) SyncBudget() time.Duration {
	return a.Config.within(a.Config.SyncBudget, SyncBudgetDefault)
}

// Close releases every client, in reverse order of creation.
func (a *App) Close() error {
	a.mu.Lock()
	closers := a.closers
	a.closers = nil
	a.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	return errors.Join(errs...)
}

// Lazy builds a value on first use. A failed build is not kept: the next Get tries again, so a
// transient failure at cold start does not poison the instance.
type Lazy[T any] struct {
	build func(ctx context.Context) (T, error)

	mu    sync.Mutex
	value T
	built bool
}

// NewLazy returns a Lazy that builds with build.
func NewLazy[T any](build func(ctx context.Context) (T, error)) *Lazy[T] {
	return &Lazy[T]{build: build}
}

// Get returns the value, building it if needed.
func (l *Lazy[T]) Get(ctx context.Context) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.built {
		return l.value, nil
	}
	v, err := l.build(ctx)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("build: %w", err)
	}
	l.value, l.built = v, true
	return v, nil
}
