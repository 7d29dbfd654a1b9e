package functions

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/ledger"
)

// observation is a scope's final state projected to what must not depend on how often or in
// which order its messages arrived — keyed by role, so two scopes compare — and the
// invariants it breaks.
type observation struct {
	fields   map[string]string
	problems []string
}

func (o *observation) set(key string, v any) { o.fields[key] = fmt.Sprint(v) }

func (o *observation) problem(format string, args ...any) {
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
}

// observe reads sc's documents, its runs' records and receipts, and what the functions wrote to
// them since `since` (the spy's mark taken then).
func observe(ctx context.Context, fs *firestore.Client, sc *scope, since time.Time, mark spyMark) (observation, error) {
	o := observation{fields: map[string]string{}}
	prefixes := []string{}
	for _, d := range sc.docs {
		prefixes = append(prefixes, d.path)
	}
	for _, run := range sc.runs {
		prefixes = append(prefixes, ledger.RunsCollection+"/"+run)
	}
	if sc.guard != "" {
		prefixes = append(prefixes, sc.guard)
	}
	writes := writesUnder(mark, prefixes...)

	settledByPrimary := 0
	for _, d := range sc.docs {
		n, err := o.doc(ctx, fs, sc, d, writes)
		if err != nil {
			return o, err
		}
		settledByPrimary += n
	}
	settleReceipts := 0
	for _, role := range sortedKeys(sc.runs) {
		n, err := o.run(ctx, fs, sc, role, writes)
		if err != nil {
			return o, err
		}
		settleReceipts += n
	}
	if sc.guard != "" {
		o.set("writes:guard", writes.all[sc.guard])
	}

	// Run records of the scope: one per run, and no run the scope's messages do not name.
	ids, err := sc.scopeRuns(ctx, fs, since)
	if err != nil {
		return o, err
	}
	var roles []string
	for _, id := range ids {
		roles = append(roles, sc.roleOf(id))
	}
	sort.Strings(roles)
	o.set("scope.run_records", strings.Join(roles, ","))
	for _, r := range roles {
		if strings.HasPrefix(r, "unexpected") {
			o.problem("run record %s of this scope was started by no message delivered to it", r)
		}
	}

	// What the runs counted adds up to what was settled.
	if sc.counted == "" {
		settled := 0
		for _, d := range sc.docs {
			if d.kind == docExecution && o.fields[d.role+".settlement.reason"] != "<nil>" {
				settled++
			}
		}
		if settleReceipts != settled {
			o.problem("%d settle receipts across the scope's runs, but %d rows settled", settleReceipts, settled)
		}
	} else if counted := o.fields["run:primary.output."+sc.counted]; counted != fmt.Sprint(settledByPrimary) {
		o.problem("the primary run's output counts %s %s, but it settled %d documents", sc.counted, counted, settledByPrimary)
	}
	sort.Strings(o.problems)
	return o, nil
}

// doc projects one tracked document and checks its writes. It returns 1 when the primary run
// settled (or, for a task, reclaimed) it.
func (o *observation) doc(ctx context.Context, fs *firestore.Client, sc *scope, d trackedDoc, writes docWrites) (int, error) {
	snap, err := fs.Doc(d.path).Get(ctx)
	if err != nil && status.Code(err) != codes.NotFound {
		return 0, err
	}
	data := map[string]any{}
	if snap != nil && snap.Exists() {
		data = snap.Data()
	}
	o.set("writes:"+d.role, writes.all[d.path])
	once := func(field string) {
		if n := writes.touching(d.path, field); n > 1 {
			o.problem("%s (%s): %s written %d times, want at most once", d.role, d.path, field, n)
		}
	}
	settledBy := sc.roleOf(str(dig(data, "settlement", "workflow_run_uuid")))
	switch d.kind {
	case docExecution:
		for _, f := range []string{"status", "active", "outcome", "settlement.reason", "sync.attempts", "sync.last_verdict"} {
			o.set(d.role+"."+f, dig(data, strings.Split(f, ".")...))
		}
		o.set(d.role+".settled_by", settledBy)
		once("settlement")
		row := d.path[strings.LastIndexByte(d.path, '/')+1:]
		receipts, err := fs.CollectionGroup(ledger.SyncsCollection).Where("runner_execution_uuid", "==", row).Documents(ctx).GetAll()
		if err != nil {
			return 0, err
		}
		o.set(d.role+".receipts", len(receipts))
		for _, r := range receipts {
			if n := writes.all[relPath(r.Ref.Path)]; n > 1 {
				o.problem("%s: receipt %s written %d times", d.role, relPath(r.Ref.Path), n)
			}
		}
		if run := str(dig(data, "settlement", "workflow_run_uuid")); run != "" {
			if !slices.ContainsFunc(receipts, func(r *firestore.DocumentSnapshot) bool {
				return r.Ref.Parent.Parent.ID == run && r.Data()["change"] == string(ledger.ChangeSettle)
			}) {
				o.problem("%s was settled by run %s, which holds no settle receipt for it", d.role, settledBy)
			}
		}
	case docExtension, docLease:
		for _, f := range []string{"status", "outcome", "settlement.reason"} {
			o.set(d.role+"."+f, dig(data, strings.Split(f, ".")...))
		}
		o.set(d.role+".settled_by", settledBy)
		once("settlement")
		once("status")
	case docInterlock:
		o.set(d.role+".exists", len(data) > 0)
		if n := writes.deletes[d.path]; n > 1 {
			o.problem("%s released %d times", d.role, n)
		}
	case docTask:
		for _, f := range []string{"status", "reclaim_count", "worker_id"} {
			o.set(d.role+"."+f, dig(data, f))
		}
		for _, chain := range []string{ledger.ChainStatuses, ledger.ChainHeartbeats} {
			entries, err := fs.Doc(d.path).Collection(chain).Documents(ctx).GetAll()
			if err != nil {
				return 0, err
			}
			o.set(d.role+"."+chain, len(entries))
		}
		chainWrites := 0
		for path, n := range writes.all {
			if strings.HasPrefix(path, d.path+"/") {
				chainWrites += n
			}
		}
		o.set("writes:"+d.role+".chains", chainWrites)
		once("reclaim_count")
		if n, _ := data["reclaim_count"].(int64); n > 0 {
			return 1, nil
		}
		return 0, nil
	case docUntouchable:
		if n := writes.all[d.path]; n > 0 {
			o.problem("%s (%s) was written %d times; no message may write it", d.role, d.path, n)
		}
	}
	if settledBy == "primary" {
		return 1, nil
	}
	return 0, nil
}

// run projects the record of one of sc's runs and its receipts, and returns how many of its
// receipts are settlements.
func (o *observation) run(ctx context.Context, fs *firestore.Client, sc *scope, role string, writes docWrites) (int, error) {
	uuid := sc.runs[role]
	path := ledger.RunsCollection + "/" + uuid
	key := "run:" + role
	recorded := role == "primary" && sc.recorded
	snap, err := fs.Doc(path).Get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
		o.set(key+".exists", false)
		if recorded {
			o.problem("run %s has no record", role)
		}
	case err != nil:
		return 0, err
	default:
		data := snap.Data()
		o.set(key+".exists", true)
		st := str(data["status"])
		o.set(key+".status", st)
		o.set(key+".failure_reason", dig(data, "failure", "failure_reason"))
		flatten(o.fields, key+".output", data["output"])
		flatten(o.fields, key+".stats", data["stats"])
		if st != "completed" && st != "failed" {
			o.problem("run %s is %q, not terminal", role, st)
		}
		// One commit creates the record, one ends it: a run started twice, or ended twice,
		// writes more. A record the scope's setup wrote is no delivery's to write.
		if n := writes.all[path]; sc.seeded[role] && n != 0 {
			o.problem("run %s's record was written %d times by the deliveries; it was seeded before them", role, n)
		} else if n != 2 && !sc.seeded[role] {
			o.problem("run %s's record was written %d times, want 2 (created, ended)", role, n)
		}
	}
	receipts, err := fs.Doc(path).Collection(ledger.SyncsCollection).Documents(ctx).GetAll()
	if err != nil {
		return 0, err
	}
	byChange := map[string]int{}
	settles := 0
	for _, r := range receipts {
		change, outcome := str(r.Data()["change"]), str(r.Data()["outcome"])
		byChange[strings.TrimSuffix(change+":"+outcome, ":")]++
		if change == string(ledger.ChangeSettle) {
			settles++
		}
	}
	o.set(key+".receipts", fmt.Sprint(byChange))
	if _, syncs := o.fields[key+".output.started_count"]; recorded && syncs {
		if started := o.fields[key+".output.started_count"]; started != fmt.Sprint(len(receipts)) || o.fields[key+".stats.published"] != started {
			o.problem("run %s started %s syncs and published %s, but holds %d receipts", role, started, o.fields[key+".stats.published"], len(receipts))
		}
	}
	return settles, nil
}

// flatten adds v's numbers, booleans and outcome words under prefix, and a list as its length.
// Times, ids and words that name a clock reading are left out: they differ between deliveries
// without meaning anything. Of the storm guard's verdict only whether it tripped is kept: its
// counts of the fleet's live rows grow as scopes are added.
func flatten(out map[string]string, prefix string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.HasSuffix(prefix, ".storm_guard") && k != "tripped" {
				continue
			}
			flatten(out, prefix+"."+k, e)
		}
	case []any:
		out[prefix+".len"] = fmt.Sprint(len(x))
	case int64, float64, bool:
		out[prefix] = fmt.Sprint(x)
	case string:
		if k := prefix[strings.LastIndexByte(prefix, '.')+1:]; k == "outcome" || k == "status" {
			out[prefix] = x
		}
	}
}

// diff lists the keys whose values differ between a baseline and another observation.
func diff(want, got map[string]string) []string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for _, k := range sortedKeys(keys) {
		w, okw := want[k]
		g, okg := got[k]
		if w != g || okw != okg {
			out = append(out, fmt.Sprintf("%s: %s, want %s", k, orAbsent(g, okg), orAbsent(w, okw)))
		}
	}
	return out
}

func orAbsent(v string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return v
}

// dig reads a nested field of a document's data; nil when any step is missing.
func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
