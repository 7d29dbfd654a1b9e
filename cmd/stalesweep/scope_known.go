package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// scopeCheckTimeout bounds the look-up behind a warning about an unknown scope: the warning is
// a courtesy, and the command goes on without it.
const scopeCheckTimeout = 5 * time.Second

// unknownScope says what was looked for when scope (a ScopeValues.Key) of workflow typ has no
// rows and no record — no row of its kind, no run of typ on it (beyond ownRuns, the runs the
// command itself just recorded), no pause of it — or "" when something of it exists (or the
// look-up failed: then nothing is said). Each look-up reads at most ownRuns+1 documents.
func unknownScope(ctx context.Context, fsc *firestore.Client, typ contract.WorkflowType, scope string, ownRuns int) string {
	d, ok := app.Declared()[typ]
	if !ok || scope == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, scopeCheckTimeout)
	defer cancel()
	parts := strings.Split(scope, "/")
	var looked []string
	var queries []firestore.Query
	var docs []*firestore.DocumentRef
	switch kind := d.Scope.Kind; {
	case kind == contract.ScopeQueue:
		looked = append(looked, "no task in "+ledger.TaskQueuesCollection+"/"+scope+"/"+ledger.TasksCollection)
		queries = append(queries, fsc.Collection(ledger.TaskQueuesCollection).Doc(scope).Collection(ledger.TasksCollection).Query)
	case kind == contract.ScopeRunnerGroup && len(parts) == 2:
		looked = append(looked, "no "+ledger.RunnerGroupsCollection+"/"+parts[1])
		docs = append(docs, fsc.Collection(ledger.RunnerGroupsCollection).Doc(parts[1]))
	case kind == contract.ScopeOrganization || kind == contract.ScopeRunnerGroup:
		looked = append(looked, "no "+ledger.OrganizationsCollection+"/"+parts[0], "no runner execution of it")
		docs = append(docs, fsc.Collection(ledger.OrganizationsCollection).Doc(parts[0]))
		queries = append(queries, fsc.Collection(ledger.ExecutionsCollection).Where("organization_uuid", "==", parts[0]))
	default:
		return ""
	}
	docs = append(docs, fsc.Collection(pausestore.PausesCollection).Doc(pausestore.PauseID(string(typ), scope)))
	queries = append(queries, fsc.Collection(ledger.RunsCollection).Where("workflow_type", "==", string(typ)).Where("scope", "==", scope))
	looked = append(looked, "no run of "+string(typ)+" on it recorded", "no pause of it")
	for _, ref := range docs {
		snap, err := ref.Get(ctx)
		switch {
		case err == nil && snap.Exists():
			return ""
		case err != nil && !notFound(err):
			return ""
		}
	}
	runs := len(queries) - 1 // the last query is the run records'
	for i, q := range queries {
		more := 0
		if i == runs {
			more = ownRuns
		}
		snaps, err := q.Limit(more + 1).Documents(ctx).GetAll()
		if err != nil || len(snaps) > more {
			return ""
		}
	}
	return strings.Join(looked, ", ")
}

// warnUnknownScope says on stderr, as a warning, that scope of typ has no rows and no record:
// most likely a typo. It never changes the command's exit code.
func (c *cli) warnUnknownScope(name string, fsc *firestore.Client, typ contract.WorkflowType, scope string, ownRuns int, going string) {
	if looked := unknownScope(c.ctx, fsc, typ, scope, ownRuns); looked != "" {
		fmt.Fprintf(c.stderr, "stalesweep %s: warning: %s has no scope %q that anything knows (%s): a typo? %s\n", name, typ, scope, looked, going)
	}
}

func notFound(err error) bool { return status.Code(err) == codes.NotFound }
