package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/leasesettle"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/pmsweep"
	"github.com/stalesweep/stalesweep/internal/runssweep"
)

// The workflows that settle on age: each explains its rows with the workflow built as the app
// builds it, over the same stores, on Firestore's clock.

// explainExtensionRun explains extension_runs/RUN_ID (platform.extension.runs.sweep).
func explainExtensionRun(ctx context.Context, a *app.App, id string, o explain.Options) (explain.Explanation, error) {
	store := ledger.NewExtensionRunStore(a.Firestore, a.Config.Tx)
	wf := runssweep.New(store, a.Config.RunsSweep, ledger.ServerClock(a.Firestore))
	return noRow(wf.Explain(ctx, store, id, o))
}

// explainTask explains tasks/QUEUE/TASK_ID, or tasks/TASK_ID for a task of the seed's default
// queue (pm.sweep): a task's document is task_queues/QUEUE/tasks/TASK_ID.
func explainTask(ctx context.Context, a *app.App, id string, o explain.Options) (explain.Explanation, error) {
	queue, task := pmsweep.QueueDefault, id
	if q, t, ok := strings.Cut(id, "/"); ok {
		queue, task = q, t
	}
	if queue == "" || task == "" || strings.Contains(task, "/") {
		return explain.Explanation{}, fmt.Errorf("want tasks/QUEUE/TASK_ID or tasks/TASK_ID (queue %q), got tasks/%s", pmsweep.QueueDefault, id)
	}
	store := ledger.NewTaskStore(a.Firestore, a.Config.Tx)
	wf := pmsweep.New(store, a.Config.PMSweep, ledger.ServerClock(a.Firestore))
	return noRow(wf.Explain(ctx, store, queue, task, o))
}

// explainLease explains workspace_leases/LEASE_UUID (runner.workspace-lease-settle).
func explainLease(ctx context.Context, a *app.App, id string, o explain.Options) (explain.Explanation, error) {
	store := ledger.NewLeaseStore(a.Firestore, a.Config.Tx)
	wf := leasesettle.New(store, a.Config.LeaseSettle, ledger.ServerClock(a.Firestore))
	return noRow(wf.Explain(ctx, store, id, o))
}

// noRow turns the ledger's missing row into the command's.
func noRow(e explain.Explanation, err error) (explain.Explanation, error) {
	if errors.Is(err, ledger.ErrNoRow) {
		return e, fmt.Errorf("%w (%v)", errNoRow, err)
	}
	return e, err
}
