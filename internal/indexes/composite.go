package indexes

import (
	"strings"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Order is an index field's direction.
type Order string

// Index field directions, named as firestore.indexes.json names them.
const (
	ascending  Order = "ASCENDING"
	descending Order = "DESCENDING"
)

// Field is one field of a composite index.
type Field struct {
	Path  string
	Order Order
}

// Index is a composite index on one collection group, in collection scope.
type Index struct {
	Collection string
	Fields     []Field
	// Query says which query needs it, for the docs and the generated files.
	Query string
}

// Composite is the one list of the composite indexes stalesweep's queries need. It is the source
// of firestore.indexes.json and of the Terraform module's indexes; the tests hold every query
// the code runs to an entry here.
func Composite() []Index {
	return []Index{
		{
			Collection: ledger.ExecutionsCollection,
			Query:      "stale active executions of one organization and provider, oldest observed first (and the probe's, of up to 30 organizations at once)",
			Fields: []Field{
				{"organization_uuid", ascending},
				{"provider", ascending},
				{"active", ascending},
				{"observed_at", ascending},
			},
		},
		{
			Collection: ledger.ExecutionsCollection,
			Query:      "rows one executor target answered about within a window, fleet-wide (the blind-executor guard)",
			Fields: []Field{
				{"sync.target", ascending},
				{"sync.last_synced_at", ascending},
			},
		},
		{
			Collection: ledger.ExecutionsCollection,
			Query:      "active rows one executor target does not know, since a clearance, fleet-wide (the blind-executor guard)",
			Fields: []Field{
				{"active", ascending},
				{"sync.target", ascending},
				{"sync.unknown_since", ascending},
			},
		},
		{
			Collection: ledger.ExecutionsCollection,
			Query:      "the active Cloud Run rows a completion entry names, by execution name (ObserveExecution)",
			Fields: []Field{
				{"provider", ascending},
				{"active", ascending},
				{"provider_ref.execution", ascending}, // cloudrun.RefKey
			},
		},
		{
			Collection: ledger.ExecutionsCollection,
			Query:      "the active Kubernetes rows a Job's end event names, by the Job's uid (ObserveExecution)",
			Fields: []Field{
				{"provider", ascending},
				{"active", ascending},
				{"provider_ref.uid", ascending}, // kubejobs.RefUID
			},
		},
		{
			Collection: ledger.ExtensionRunsCollection,
			Query:      "running app invocations of every tenant idle past a deadline, least recently moved first",
			Fields: []Field{
				{"status", ascending},
				{"last_moved_at", ascending},
			},
		},
		{
			Collection: ledger.TasksCollection,
			Query:      "working tasks of one queue, least recently active first (pm.sweep)",
			Fields: []Field{
				{"status", ascending},
				{"last_activity_at", ascending},
			},
		},
		{
			Collection: ledger.WorkspaceLeasesCollection,
			Query:      "active workspace leases of one runner group, oldest heartbeat first",
			Fields: []Field{
				{"organization_uuid", ascending},
				{"runner_group_uuid", ascending},
				{"status", ascending},
				{"heartbeat_at", ascending},
			},
		},
		{
			Collection: ledger.RosterCollection,
			Query:      "the roster's next shard after an organization (Dispatch)",
			Fields: []Field{
				{"shard_of", ascending},
				{"last", ascending},
			},
		},
		{
			Collection: ledger.TasksCollection,
			Query:      "new tasks of one queue, oldest first (a worker's next)",
			Fields: []Field{
				{"status", ascending},
				{"created_at", ascending},
			},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "runs list --workflow: one workflow type's runs, newest first",
			Fields:     []Field{{"workflow_type", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "runs list --status: runs in one status, newest first",
			Fields:     []Field{{"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "runs list --workflow --scope: one workflow's runs on one scope, newest first",
			Fields:     []Field{{"workflow_type", ascending}, {"scope", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "runs list --workflow --status: one workflow's runs in one status, newest first",
			Fields:     []Field{{"workflow_type", ascending}, {"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "runs list --workflow --scope --status: one workflow's runs on one scope in one status, newest first",
			Fields:     []Field{{"workflow_type", ascending}, {"scope", ascending}, {"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: ledger.RunsCollection,
			Query:      "orgs list: the newest run of one workflow on any scope of one organization (its runner groups')",
			Fields:     []Field{{"workflow_type", ascending}, {"initial_data.organization_uuid", ascending}, {"initiated_at", descending}},
		},
	}
}

// String renders an index for messages: "runner_executions(organization_uuid ASC, ...)".
func (ix Index) String() string {
	parts := make([]string, len(ix.Fields))
	for i, f := range ix.Fields {
		parts[i] = f.Path + " " + strings.TrimSuffix(string(f.Order), "ENDING")
	}
	return ix.Collection + "(" + strings.Join(parts, ", ") + ")"
}
