// Package app builds, once per process, the dependencies every face of stalesweep shares (the
// Firestore client, the executor clients, the workflow engine) from a Config, and closes them.
// The functions build it lazily on their first call and retry a failed build on the next; the
// command builds it from flags and the environment.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// App is one process's dependencies.
type App struct {
	Config    Config
	Firestore *firestore.Client
	Engine    *workflow.Engine
	Log       *slog.Logger

	closers []func() error
}

// New builds an App. now is the clock every workflow uses.
func New(ctx context.Context, cfg Config, log *slog.Logger, now func() time.Time) (_ *App, err error) {
	a := &App{Config: cfg, Log: log}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	a.Firestore, err = ledger.Open(ctx, ledger.Options{Project: cfg.Project, Database: cfg.Database})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Firestore.Close)

	runClient, err := cloudrun.Dial(ctx, cfg.CloudRunEndpoint)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, runClient.Close)

	store := ledger.NewExecutionStore(a.Firestore, cfg.Tx)
	adapter := cloudrun.New(runClient, cfg.CloudRun)
	syncCfg := cfg.Sync
	syncCfg.Provider = ledger.ProviderCloudRun
	syncCfg.Budget = cfg.budget()
	syncCfg = syncCfg.WithDefaults()
	syncer := executionsync.NewSyncer(store, adapter, now, syncCfg.LostGrace, log)
	cloudRunSync, err := executionsync.New(store, adapter, &executionsync.Inline{Syncer: syncer, Concurrency: syncCfg.Concurrency}, syncCfg, now)
	if err != nil {
		return nil, err
	}
	a.Engine = workflow.NewEngine(ledger.NewRunStore(a.Firestore), now, log,
		cloudRunSync.Definition(contract.ExecutionSyncCloudRun, executionsync.EnvelopeCloudRun),
	)
	return a, nil
}

// Close releases every client, in reverse order of creation.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// Lazy builds an App on first use. A failed build is not kept: the next Get tries again, so a
// transient failure at cold start does not poison the instance.
type Lazy struct {
	build func(ctx context.Context) (*App, error)

	mu  sync.Mutex
	app *App
}

// NewLazy returns a Lazy that builds with build.
func NewLazy(build func(ctx context.Context) (*App, error)) *Lazy { return &Lazy{build: build} }

// Get returns the App, building it if needed.
func (l *Lazy) Get(ctx context.Context) (*App, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.app != nil {
		return l.app, nil
	}
	a, err := l.build(ctx)
	if err != nil {
		return nil, fmt.Errorf("build app: %w", err)
	}
	l.app = a
	return a, nil
}
