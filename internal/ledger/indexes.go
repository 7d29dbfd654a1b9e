package ledger

import (
	"slices"
	"strings"
)

// Order is an index field's direction.
type Order string

// Index field directions, named as firestore.indexes.json names them.
const (
	ascending  Order = "ASCENDING"
	descending Order = "DESCENDING"
)

// IndexField is one field of a composite index.
type IndexField struct {
	Path  string
	Order Order
}

// Index is a composite index on one collection group, in collection scope.
type Index struct {
	Collection string
	Fields     []IndexField
	// Query says which query needs it, for the docs and the generated files.
	Query string
}

// Indexes is the one list of the composite indexes stalesweep's queries need. It is the source
// of firestore.indexes.json and of the Terraform module's indexes; the tests hold every query
// the code runs to an entry here.
func Indexes() []Index {
	return []Index{
		{
			Collection: ExecutionsCollection,
			Query:      "stale active executions of one organization and provider, oldest observed first (and the probe's, of up to 30 organizations at once)",
			Fields: []IndexField{
				{"organization_uuid", ascending},
				{"provider", ascending},
				{"active", ascending},
				{"observed_at", ascending},
			},
		},
		{
			Collection: ExecutionsCollection,
			Query:      "rows one executor target answered about within a window, fleet-wide (the blind-executor guard)",
			Fields: []IndexField{
				{"sync.target", ascending},
				{"sync.last_synced_at", ascending},
			},
		},
		{
			Collection: ExecutionsCollection,
			Query:      "active rows one executor target does not know, since a clearance, fleet-wide (the blind-executor guard)",
			Fields: []IndexField{
				{"active", ascending},
				{"sync.target", ascending},
				{"sync.unknown_since", ascending},
			},
		},
		{
			Collection: ExtensionRunsCollection,
			Query:      "running app invocations of every tenant idle past a deadline, least recently moved first",
			Fields: []IndexField{
				{"status", ascending},
				{"last_moved_at", ascending},
			},
		},
		{
			Collection: TasksCollection,
			Query:      "working tasks of one queue, least recently active first (pm.sweep)",
			Fields: []IndexField{
				{"status", ascending},
				{"last_activity_at", ascending},
			},
		},
		{
			Collection: WorkspaceLeasesCollection,
			Query:      "active workspace leases of one runner group, oldest heartbeat first",
			Fields: []IndexField{
				{"organization_uuid", ascending},
				{"runner_group_uuid", ascending},
				{"status", ascending},
				{"heartbeat_at", ascending},
			},
		},
		{
			Collection: RosterCollection,
			Query:      "the roster's next shard after an organization (Dispatch)",
			Fields: []IndexField{
				{"shard_of", ascending},
				{"last", ascending},
			},
		},
		{
			Collection: TasksCollection,
			Query:      "new tasks of one queue, oldest first (a worker's next)",
			Fields: []IndexField{
				{"status", ascending},
				{"created_at", ascending},
			},
		},
		{
			Collection: RunsCollection,
			Query:      "runs list --workflow: one workflow type's runs, newest first",
			Fields:     []IndexField{{"workflow_type", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: RunsCollection,
			Query:      "runs list --status: runs in one status, newest first",
			Fields:     []IndexField{{"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: RunsCollection,
			Query:      "runs list --workflow --scope: one workflow's runs on one scope, newest first",
			Fields:     []IndexField{{"workflow_type", ascending}, {"scope", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: RunsCollection,
			Query:      "runs list --workflow --status: one workflow's runs in one status, newest first",
			Fields:     []IndexField{{"workflow_type", ascending}, {"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: RunsCollection,
			Query:      "runs list --workflow --scope --status: one workflow's runs on one scope in one status, newest first",
			Fields:     []IndexField{{"workflow_type", ascending}, {"scope", ascending}, {"status", ascending}, {"initiated_at", descending}},
		},
		{
			Collection: RunsCollection,
			Query:      "orgs list: the newest run of one workflow on any scope of one organization (its runner groups')",
			Fields:     []IndexField{{"workflow_type", ascending}, {"initial_data.organization_uuid", ascending}, {"initiated_at", descending}},
		},
	}
}

// IndexFor returns the index that serves a query on collection with equality filters on eq (in
// any order) and an inequality or order on orderBy, or false when Indexes lists none. A query of
// equality filters alone (ordered by document id at most: the counts of the storm guard and of
// the invisible rows) needs no composite index: Firestore serves it by merging its automatic
// single-field indexes, and IndexFor reports that as a field-less Index. gc's range on the
// expiry of a collection of ExpiringCollections is served by the single-field index its TTL
// policy declares.
func IndexFor(collection string, eq []string, orderBy string) (Index, bool) {
	if orderBy == "" && len(eq) > 0 {
		return Index{Collection: collection, Query: "equality filters only: Firestore's automatic single-field indexes, merged"}, true
	}
	if orderBy == ExpireField && len(eq) == 0 {
		for _, e := range ExpiringCollections() {
			if e.Collection == collection {
				return Index{Collection: collection, Fields: []IndexField{{ExpireField, ascending}},
					Query: "expired bookkeeping, oldest expiry first (gc): the TTL field's own single-field index (terraform/firestore_ttl.tf.json)"}, true
			}
		}
	}
	if orderBy != "" && len(eq) == 0 {
		// One field ranged or ordered on, either way, and nothing else: its automatic
		// single-field index (runs list with no filter but --since).
		return Index{Collection: collection, Query: "one field ordered: Firestore's automatic single-field index"}, true
	}
	for _, ix := range Indexes() {
		if ix.Collection != collection || len(ix.Fields) != len(eq)+1 {
			continue
		}
		last := ix.Fields[len(ix.Fields)-1]
		if last.Path != orderBy {
			continue
		}
		got := make([]string, 0, len(eq))
		for _, f := range ix.Fields[:len(ix.Fields)-1] {
			got = append(got, f.Path)
		}
		want := slices.Clone(eq)
		slices.Sort(got)
		slices.Sort(want)
		if slices.Equal(got, want) {
			return ix, true
		}
	}
	return Index{}, false
}

// String renders an index for messages: "runner_executions(organization_uuid ASC, ...)".
func (ix Index) String() string {
	parts := make([]string, len(ix.Fields))
	for i, f := range ix.Fields {
		parts[i] = f.Path + " " + strings.TrimSuffix(string(f.Order), "ENDING")
	}
	return ix.Collection + "(" + strings.Join(parts, ", ") + ")"
}
