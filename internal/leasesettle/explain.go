package leasesettle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stalesweep/stalesweep/internal/agesweep"
	"github.com/stalesweep/stalesweep/internal/explain"
	"github.com/stalesweep/stalesweep/internal/ledger"
)

// Rows is what Explain needs besides the workflow's Store; *ledger.LeaseStore has it.
type Rows = agesweep.Rows[ledger.WorkspaceLease]

// Explain says what a run over the lease's runner group would do with it now, and why, by the
// abandoning transaction's rules (Refuse, Decide) on a read-only re-read. It writes nothing.
func (w *Workflow) Explain(ctx context.Context, rows Rows, leaseID string, _ explain.Options) (explain.Explanation, error) {
	e := explain.Explanation{Collection: ledger.WorkspaceLeasesCollection, ID: leaseID, WorkflowType: string(Declared.Type)}
	row, now, err := agesweep.Explaining(ctx, &e, w.Clock, rows.Row)
	if err != nil {
		return e, err
	}
	l := row.Value
	if row.Malformed != "" { // the scope and status, as far as the fields say them
		l.OrganizationUUID, _ = row.Fields["organization_uuid"].(string)
		l.RunnerGroupUUID, _ = row.Fields["runner_group_uuid"].(string)
		l.Status, _ = row.Fields["status"].(string)
	}
	e.Scope = l.OrganizationUUID + "/" + l.RunnerGroupUUID
	stamped := row.HasTimestamp(scan.Field)
	group, gerr := ledger.RunnerGroup{}, ledger.ErrGroupNotFound
	if l.RunnerGroupUUID != "" {
		group, gerr = w.Store.GetGroup(ctx, l.RunnerGroupUUID)
	}
	if gerr != nil && !errors.Is(gerr, ledger.ErrGroupNotFound) {
		return e, gerr
	}
	groupOK := gerr == nil && group.OrganizationUUID == l.OrganizationUUID && group.HeartbeatTimeoutSeconds > 0
	timeout := time.Duration(group.HeartbeatTimeoutSeconds) * time.Second

	in := Input{OrganizationUUID: l.OrganizationUUID, RunnerGroupUUID: l.RunnerGroupUUID}
	var (
		holder   ledger.HolderView
		facts    ledger.Facts
		abandon  bool
		why      string
		reRead   bool
		refusal  string
		previewd error
	)
	if row.Malformed == "" && groupOK {
		_, refusal, previewd = w.Store.PreviewAbandonLease(ctx, leaseID, ledger.Reads{Organization: l.OrganizationUUID},
			func(fresh ledger.WorkspaceLease, h ledger.HolderView, f ledger.Facts) (*ledger.Settlement, string) {
				l, holder, facts, reRead = fresh, h, f, true
				if why := Refuse(fresh, in, f, false); why != "" {
					return nil, why
				}
				abandon, why = Decide(fresh, h, now, timeout)
				return nil, "" // explain writes nothing
			})
		if previewd != nil {
			return e, previewd
		}
	}
	valid, decodes := scan.Checks(row.Fields, stamped, row.Malformed)
	e.Checks = []explain.Check{
		{Name: "status active", OK: l.Status == ledger.LeaseActive, Detail: fmt.Sprintf("status %q; the scan reads active leases only", l.Status)},
		valid, decodes,
		{Name: "runner group usable", OK: groupOK, Detail: groupDetail(group, gerr, l)},
		{Name: "organization enabled", OK: facts.OrganizationEnabled || !reRead, Detail: enabledDetail(facts, reRead)},
	}
	e.Decided()
	if l.Settlement != nil {
		e.Last = map[string]any{"settlement": l.Settlement, "released_at": l.ReleasedAt}
	}
	age := "unknown"
	if stamped {
		age = fmt.Sprintf("%ds", int64(now.Sub(l.HeartbeatAt)/time.Second))
	}
	holderSays := fmt.Sprintf("holder %s: unresolvable (missing, or not of the lease's organization and group)", l.HolderUUID)
	if holder.Resolved {
		holderSays = fmt.Sprintf("holder %s: %s", l.HolderUUID, holder.Status)
	}
	switch {
	case scan.Skipped(&e, stamped, row.Malformed): // no run reads it: the rules are not asked
	case !groupOK:
		e.Verdict, e.Rule, e.Detail = "refuse", "runner_group_uuid", "a run over the lease's group is refused before it reads anything"
	case refusal != "":
		e.Verdict, e.Rule = "refuse", refusal
		e.Detail = "the lease is not a run's to write: " + holderSays
	case abandon:
		e.Verdict, e.Outcome, e.Rule = "abandon", ledger.LeaseAbandoned, why
		e.Detail = fmt.Sprintf("%s; heartbeat %s old against the group's timeout %ds", holderSays, age, group.HeartbeatTimeoutSeconds)
	default:
		e.Verdict, e.Rule = "keep", why
		e.Detail = fmt.Sprintf("%s; heartbeat %s old against the group's timeout %ds", holderSays, age, group.HeartbeatTimeoutSeconds)
	}
	return e, nil
}

var scan = agesweep.Scan{Field: "heartbeat_at", Noun: "lease", Settler: "run", Settles: "settles"}

func groupDetail(g ledger.RunnerGroup, err error, l ledger.WorkspaceLease) string {
	switch {
	case err != nil:
		return fmt.Sprintf("runner group %q does not exist: a run over it is refused", l.RunnerGroupUUID)
	case g.OrganizationUUID != l.OrganizationUUID:
		return fmt.Sprintf("runner group %s belongs to organization %s, not the lease's %s", l.RunnerGroupUUID, g.OrganizationUUID, l.OrganizationUUID)
	case g.HeartbeatTimeoutSeconds <= 0:
		return fmt.Sprintf("runner group %s has no positive heartbeat_timeout_seconds: a run over it is refused", l.RunnerGroupUUID)
	}
	return fmt.Sprintf("heartbeat_timeout_seconds %d", g.HeartbeatTimeoutSeconds)
}

func enabledDetail(f ledger.Facts, read bool) string {
	switch {
	case !read:
		return "not read"
	case f.OrganizationEnabled:
		return "sweeps_enabled"
	}
	return "the organization opted out of sweeps (or does not exist): no run writes its leases"
}
