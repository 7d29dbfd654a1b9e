package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/executor"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/kubejobs"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logentry"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// declared is one workflow this build declares, with what New needs to build it: New, Declared,
// Explained and CheckExplainID range over workflows instead of naming each workflow.
type declared struct {
	workflow.Declaration
	// explains is the collection whose rows the workflow explains ("" for none).
	explains string
	// signal is an execution sync's executor's completion signal, its Provider set (Signals).
	signal *logentry.Signal
	// explainIDs are the document ids an explained row's ID names, with the form it is wanted
	// in, when that is not one document id of explains.
	explainIDs func(id string) (ids []string, want string)
	// bounds are an age sweep's run budget and storm guard in its Config: New keeps the budget
	// within the platform's, and gives the storm guard to every workflow whose declaration says
	// AgeBased.
	bounds func(*Config) *agesweep.Bounds
	// build builds the workflow on the shared dependencies; nil when this build does not run it
	// (an executor left out of the binary).
	build func(s shared) (*built, error)
}

// workflows is every workflow this build declares, in the order the engines hold them.
var workflows = []declared{
	executionSync(executionsync.CloudRun, cloudrun.Signal, func(cfg Config, run *cloudrun.Lazy) (syncExecutor, error) {
		return cloudrun.New(run, cfg.CloudRun), nil
	}),
	executionSync(executionsync.Kubernetes, kubejobs.Signal, func(cfg Config, _ *cloudrun.Lazy) (syncExecutor, error) { return kubernetesExecutor(cfg) }),
	// The workflows that settle on age alone judge it on Firestore's clock, as their writers
	// stamp it: no process's clock enters the comparison.
	ageSweep(runssweep.Declared, ledger.ExtensionRunsCollection, func(c *Config) *agesweep.Bounds { return &c.RunsSweep.Bounds },
		func(s shared) (workflow.Definition, Explainer) {
			store := ledger.NewExtensionRunStore(s.fs, s.cfg.Tx)
			wf := runssweep.New(store, s.cfg.RunsSweep, firestoreconn.ServerClock(s.fs))
			return wf.Definition(), func(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
				return noRow(wf.Explain(ctx, store, id, o))
			}
		}),
	withExplainIDs(ageSweep(pmsweep.Declared, ledger.TasksCollection, func(c *Config) *agesweep.Bounds { return &c.PMSweep.Bounds },
		func(s shared) (workflow.Definition, Explainer) {
			store := ledger.NewTaskStore(s.fs, s.cfg.Tx)
			wf := pmsweep.New(store, s.cfg.PMSweep, firestoreconn.ServerClock(s.fs))
			return wf.Definition(), func(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
				return explainTask(ctx, wf, store, id, o)
			}
		}),
		func(id string) ([]string, string) {
			const want = "tasks/QUEUE/TASK_ID or tasks/TASK_ID"
			if q, t, ok := strings.Cut(id, "/"); ok {
				return []string{q, t}, want
			}
			return []string{id}, want
		}),
	ageSweep(leasesettle.Declared, ledger.WorkspaceLeasesCollection, func(c *Config) *agesweep.Bounds { return &c.LeaseSettle.Bounds },
		func(s shared) (workflow.Definition, Explainer) {
			store := ledger.NewLeaseStore(s.fs, s.cfg.Tx)
			wf := leasesettle.New(store, s.cfg.LeaseSettle, firestoreconn.ServerClock(s.fs))
			return wf.Definition(), func(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
				return noRow(wf.Explain(ctx, store, id, o))
			}
		}),
}

// Declared is every workflow this build runs, each as it declares itself: New builds exactly
// these, and the Terraform checks read scheduled ticks against them.
func Declared() workflow.Declarations {
	ds := make([]workflow.Declaration, len(workflows))
	for i, w := range workflows {
		ds[i] = w.Declaration
	}
	return workflow.Declared(ds...)
}

// Signals are the completion signals of every executor this build declares, in declaration
// order: the sink filters (stalesweep sinks) and what ObserveExecution reads.
func Signals() []logentry.Signal {
	var out []logentry.Signal
	for _, w := range workflows {
		if w.signal != nil {
			out = append(out, *w.signal)
		}
	}
	return out
}

// Explained lists, sorted, the collections whose rows the declared workflows explain.
func Explained() []string {
	var out []string
	for _, w := range workflows {
		if w.explains != "" && !slices.Contains(out, w.explains) {
			out = append(out, w.explains)
		}
	}
	slices.Sort(out)
	return out
}

// CheckExplainID refuses, before Firestore is opened, an ID that names no row of the explained
// collection coll: one document id, or the ids its workflow declares (for tasks QUEUE/TASK_ID).
func CheckExplainID(coll, id string) error {
	ids, want := []string{id}, coll+"/ID"
	for _, w := range workflows {
		if w.explains == coll && w.explainIDs != nil {
			ids, want = w.explainIDs(id)
		}
	}
	for _, part := range ids {
		if err := firestoreconn.CheckDocID(part); err != nil {
			return fmt.Errorf("want %s: the id %q %v", want, part, err)
		}
	}
	return nil
}

// withExplainIDs is w whose explained rows are named by the ids ids returns.
func withExplainIDs(w declared, ids func(string) ([]string, string)) declared {
	w.explainIDs = ids
	return w
}

// Explainer says what a workflow would do with one row of its collection now, and why, by the
// row's document id. A row that does not exist is ErrNoRow.
type Explainer func(ctx context.Context, id string, o explain.Options) (explain.Explanation, error)

// ErrNoRow is an explainer's answer for a document that does not exist.
var ErrNoRow = errors.New("no such document")

// shared are the dependencies New gives every workflow it builds.
type shared struct {
	app *App
	fs  *firestore.Client
	// cfg is the app's, the workflow's bounds set (declared.bounds).
	cfg Config
	now func() time.Time
	log *slog.Logger
	// The execution syncs' dependencies.
	run   *cloudrun.Lazy
	store *ledger.ExecutionStore
	sync  executionsync.Config
	blind *blindguard.Guard
}

// built is one workflow as New built it.
type built struct {
	// definition is the workflow on an engine whose syncs start with starter.
	definition func(starter func(*executionsync.Syncer) executionsync.Starter) (workflow.Definition, error)
	explain    Explainer
}

// ageSweep declares a workflow that settles on age alone, its run budget and storm guard in
// bounds.
func ageSweep(d workflow.Declaration, explains string, bounds func(*Config) *agesweep.Bounds, build func(shared) (workflow.Definition, Explainer)) declared {
	return declared{Declaration: d, explains: explains, bounds: bounds, build: func(s shared) (*built, error) {
		def, ex := build(s)
		return &built{definition: func(func(*executionsync.Syncer) executionsync.Starter) (workflow.Definition, error) { return def, nil }, explain: ex}, nil
	}}
}

// executionSync declares an executor's execution-sync workflow: exec is its adapter, nil when
// this build leaves it out, and signal its completion entries (the event path, App.Observer).
// It syncs its rows with its own syncer (App.Syncers), and explains the runner executions, each
// by the workflow of its provider (App.ExecutionSyncs).
func executionSync(k executionsync.Kind, signal logentry.Signal, exec func(Config, *cloudrun.Lazy) (syncExecutor, error)) declared {
	signal.Provider = k.Provider
	return declared{Declaration: k.Declaration, explains: ledger.ExecutionsCollection, signal: &signal, build: func(s shared) (*built, error) {
		x, err := exec(s.cfg, s.run)
		if err != nil || x == nil {
			return nil, err
		}
		a := s.app
		syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: s.store, Executor: x, Kind: k, Now: s.now, LostGrace: s.sync.LostGrace, Log: s.log, Guard: s.blind})
		a.Syncers[k.Provider] = syncer
		a.signals = append(a.signals, signal)
		c := s.sync
		c.Provider = k.Provider
		return &built{
			definition: func(starter func(*executionsync.Syncer) executionsync.Starter) (workflow.Definition, error) {
				wf, err := executionsync.New(s.store, x, starter(syncer), c, s.now, syncer)
				if err != nil {
					return workflow.Definition{}, err
				}
				if _, ok := a.ExecutionSyncs[k.Provider]; !ok {
					a.ExecutionSyncs[k.Provider] = wf
				}
				return wf.Definition(k), nil
			},
			explain: a.explainExecution,
		}, nil
	}}
}

// syncExecutor is an executor adapter as the execution-sync workflow uses it.
type syncExecutor = executor.Executor

// explainTask explains tasks/QUEUE/TASK_ID, or tasks/TASK_ID for a task of the seed's default
// queue (pm.sweep): a task's document is task_queues/QUEUE/tasks/TASK_ID.
func explainTask(ctx context.Context, wf *pmsweep.Workflow, store pmsweep.Rows, id string, o explain.Options) (explain.Explanation, error) {
	queue, task := pmsweep.QueueDefault, id
	if q, t, ok := strings.Cut(id, "/"); ok {
		queue, task = q, t
	}
	if queue == "" || task == "" || strings.Contains(task, "/") {
		return explain.Explanation{}, fmt.Errorf("want tasks/QUEUE/TASK_ID or tasks/TASK_ID (queue %q), got tasks/%s", pmsweep.QueueDefault, id)
	}
	return noRow(wf.Explain(ctx, store, queue, task, o))
}

// explainExecution explains a runner execution by the execution-sync workflow of its provider
// (cloud_run, kubernetes): the row's own field picks it.
func (a *App) explainExecution(ctx context.Context, id string, o explain.Options) (explain.Explanation, error) {
	p, err := ledger.NewExecutionStore(a.Firestore, a.Config.Tx, ledger.Retention{}).Peek(ctx, id, ledger.Reads{})
	switch {
	case err != nil:
		return explain.Explanation{}, err
	case !p.Found:
		return explain.Explanation{}, ErrNoRow
	}
	provider, _ := p.Raw["provider"].(string)
	wf, ok := a.ExecutionSyncs[provider]
	if !ok {
		return explain.Explanation{}, fmt.Errorf("%s/%s: provider %q is none this build syncs (%v)", ledger.ExecutionsCollection, id,
			p.Raw["provider"], slices.Sorted(maps.Keys(a.ExecutionSyncs)))
	}
	e, err := wf.Explain(ctx, id, o)
	if errors.Is(err, executionsync.ErrNoRow) {
		return explain.Explanation{}, ErrNoRow // deleted between the two reads
	}
	return e, err
}

// noRow turns the ledger's missing row into the explainer's.
func noRow(e explain.Explanation, err error) (explain.Explanation, error) {
	if errors.Is(err, ledger.ErrNoRow) {
		return e, fmt.Errorf("%w (%v)", ErrNoRow, err)
	}
	return e, err
}
