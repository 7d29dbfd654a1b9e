package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

func init() { explainers[ledger.ExecutionsCollection] = explainExecution }

// explainExecution explains a runner execution by the execution-sync workflow of its provider
// (cloud_run, kubernetes): the row's own field picks it.
func explainExecution(ctx context.Context, a *app.App, id string, o explain.Options) (explain.Explanation, error) {
	p, err := ledger.NewExecutionStore(a.Firestore, a.Config.Tx, ledger.Retention{}).Peek(ctx, id, ledger.Reads{})
	switch {
	case err != nil:
		return explain.Explanation{}, err
	case !p.Found:
		return explain.Explanation{}, errNoRow
	}
	provider, _ := p.Raw["provider"].(string)
	wf, ok := a.ExecutionSyncs[provider]
	if !ok {
		return explain.Explanation{}, fmt.Errorf("%s/%s: provider %q is none this build syncs (%v)", ledger.ExecutionsCollection, id,
			p.Raw["provider"], slices.Sorted(maps.Keys(a.ExecutionSyncs)))
	}
	e, err := wf.Explain(ctx, id, o)
	if errors.Is(err, executionsync.ErrNoRow) {
		return explain.Explanation{}, errNoRow // deleted between the two reads
	}
	return e, err
}
