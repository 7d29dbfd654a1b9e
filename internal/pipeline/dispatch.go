package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/alerts"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/parallel"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// Tick asks for one run of a workflow on every scope it covers.
type Tick struct {
	WorkflowType contract.WorkflowType
	// InitialData holds the defaults of every run (min_age_seconds, limit, ...). When it names
	// a scope itself (an organization_uuid), only that scope is dispatched.
	InitialData json.RawMessage
	Trigger     string
	// Actor is who sent the tick as far as it was verified (the subscription it came through);
	// ClaimedActor is who the tick says sent it, carried on to the sweep messages as a claim.
	Actor        string
	ClaimedActor string
	// TickID is the tick message's id, which the runs' uuids derive from (RunUUID). A
	// continuation carries its tick's id.
	TickID string
	// After, on a continuation, is the organization the previous invocation stopped after.
	After string
	// Roster, on a continuation, is message.RosterBuild while the tick builds the roster.
	Roster string
}

// Defaults of DispatchConfig.
const (
	PageSizeDefault         = 500
	ShardScopesDefault      = 5000
	ProbeConcurrencyDefault = 16
	ListMaxDefault          = 10000
	BudgetDefault           = 60 * time.Second
	// RosterMaxAgeDefault is how long a roster is read before a tick rebuilds it
	// (DispatcherOptions.Roster).
	RosterMaxAgeDefault = 10 * time.Minute
	// RosterMaxAgeMax bounds RosterMaxAge: a roster's shards outlive it by
	// rosterstore.RosterOrphanAge at least.
	RosterMaxAgeMax = 6 * time.Hour
)

// DispatchConfig bounds one dispatch invocation. Zero values take the defaults.
type DispatchConfig struct {
	PageSize int // organizations read per query
	// ShardScopes is how many scopes one invocation enumerates before it hands the rest of the
	// tick on (DispatcherOptions.TicksTopic), so that a tick has no cap and an invocation is
	// bounded in time and memory.
	ShardScopes int
	// ProbeConcurrency is how many probes run at once.
	ProbeConcurrency int
	// ListMax bounds the lists that have no cursor: the queues of the fleet, the runner groups
	// of one organization. Reaching it is reported as Capped.
	ListMax int
	Budget  time.Duration // one invocation
}

// Report is what one dispatch invocation did.
type Report struct {
	WorkflowType string `json:"workflow_type"`
	TickID       string `json:"tick_id"`
	Scopes       int    `json:"scopes"`       // scopes enumerated
	Probed       int    `json:"probed"`       // scopes whose probe ran
	Quiet        int    `json:"quiet"`        // scopes whose probe found no work: nothing published
	ProbeErrors  int    `json:"probe_errors"` // probes that failed: their scopes published anyway
	Published    int    `json:"published"`    // sweep messages Pub/Sub acknowledged
	Failed       int    `json:"failed"`       // sweep messages that failed to publish
	Deferred     int    `json:"deferred"`     // enumerated but not published before the budget ran out
	Disabled     int    `json:"disabled"`     // named by the tick, but opted out of sweeps: not published
	Paused       int    `json:"paused"`       // enumerated, but the workflow is paused on them: not published
	// PausedFleet says the workflow is paused fleet-wide: nothing was enumerated or published.
	PausedFleet bool `json:"paused_fleet,omitempty"`
	Capped      bool `json:"capped"` // a list without a cursor stopped at ListMax
	// Roster is where the organizations came from: "read" (the roster), "build" (listed, and
	// written as the roster), "list" (listed), "" (not listed: a named scope, queues, the fleet).
	Roster         string `json:"roster,omitempty"`
	RosterFinished bool   `json:"roster_finished,omitempty"` // this invocation made the roster it built the one in use
	Continued      string `json:"continued,omitempty"`       // the rest of the tick was handed on, after this organization
	OutOfBudget    bool   `json:"out_of_budget"`
}

// Workflows are the workflows a dispatcher dispatches: their declared scopes and the rules the
// scheduled path applies. *workflow.Engine is one.
type Workflows interface {
	Definition(t contract.WorkflowType) (workflow.Definition, bool)
}

// Dispatcher turns a tick into sweep messages.
type Dispatcher struct {
	orgs       *orgadmin.Store
	pub        Publisher
	topic      string
	cfg        DispatchConfig
	log        *slog.Logger
	workflows  Workflows
	queues     func(ctx context.Context, limit int) ([]string, error)
	groups     func(ctx context.Context, org string, limit int) ([]string, error)
	clock      firestoreconn.Clock // set: probe each scope before publishing
	ticksTopic string              // set: hand the rest of a large tick on
	roster     *rosterstore.Store
	rosterAge  time.Duration
	pauses     PauseLister // set: skip paused scopes
}

// PauseLister lists the pauses of a workflow type; *pausestore.Store is one.
type PauseLister interface {
	List(ctx context.Context, workflowType string, limit int) ([]pausestore.Pause, error)
}

// DispatcherOptions is what a Dispatcher is built from. Orgs, Publisher, SweepsTopic, Workflows
// and Log are required; each of the rest, left zero, leaves its feature off.
type DispatcherOptions struct {
	Orgs        *orgadmin.Store
	Publisher   Publisher
	SweepsTopic string
	Workflows   Workflows
	Log         *slog.Logger
	Config      DispatchConfig

	// ListQueues is how queue-scoped workflows (pm.sweep) enumerate their scopes.
	ListQueues func(ctx context.Context, limit int) ([]string, error)
	// ListGroups is how runner-group-scoped workflows (runner.workspace-lease-settle) enumerate
	// the groups of an organization.
	ListGroups func(ctx context.Context, org string, limit int) ([]string, error)
	// Probe turns probes on: before publishing a scope's sweep, the dispatcher asks the
	// workflow's Probe whether the scope has work, at the time Probe gives (read once per
	// invocation), and publishes nothing for a quiet one. A probe that fails publishes the
	// sweep: a probe never hides work.
	Probe firestoreconn.Clock
	// TicksTopic lets one invocation hand the rest of a tick on: after ShardScopes scopes, or
	// with a quarter of its budget left, it publishes a continuation of the tick to TicksTopic —
	// the same tick, its id, and the organization to resume after — and stops.
	TicksTopic string
	// Roster has ticks read the organizations from the roster — a few documents for the whole
	// fleet — instead of listing every organizations document, while the roster is younger than
	// RosterMaxAge (0: RosterMaxAgeDefault; at most RosterMaxAgeMax). A tick that finds it
	// older, or none, lists the organizations and writes what it listed as the next roster. An
	// organization that enables sweeps is therefore swept from the next rebuild, within
	// RosterMaxAge and a tick; one that opts out is refused by its sweep and by every settling
	// transaction, whatever the roster says.
	Roster       *rosterstore.Store
	RosterMaxAge time.Duration
	// Pauses has each invocation read its workflow's pauses once (at most
	// pausestore.PauseListMax) and publish nothing for a paused scope, nor anything at all under a
	// fleet-wide pause. It is the cheap half: the engine checks the pause again when each run
	// starts, and every settling transaction of the execution syncs checks it again, so a pause
	// this read missed (one past the list's bound, one taken after the read, a read that
	// failed) still stops the run.
	Pauses PauseLister
}

// NewDispatcher returns the dispatcher o describes, its zero bounds filled with the defaults.
func NewDispatcher(o DispatcherOptions) *Dispatcher {
	cfg := o.Config
	cfg.PageSize = cmp.Or(cfg.PageSize, PageSizeDefault)
	cfg.ShardScopes = cmp.Or(cfg.ShardScopes, ShardScopesDefault)
	cfg.ProbeConcurrency = cmp.Or(cfg.ProbeConcurrency, ProbeConcurrencyDefault)
	cfg.ListMax = cmp.Or(cfg.ListMax, ListMaxDefault)
	cfg.Budget = cmp.Or(cfg.Budget, BudgetDefault)
	return &Dispatcher{
		orgs: o.Orgs, pub: o.Publisher, topic: o.SweepsTopic, cfg: cfg, log: o.Log, workflows: o.Workflows,
		queues: o.ListQueues, groups: o.ListGroups, clock: o.Probe, ticksTopic: o.TicksTopic, pauses: o.Pauses,
		roster: o.Roster, rosterAge: min(cmp.Or(o.RosterMaxAge, RosterMaxAgeDefault), RosterMaxAgeMax),
	}
}

// page is one page of a tick's scopes, and the organization to resume after ("" when it was
// the last page).
type page func(ctx context.Context, after string) (scopes []workflow.ScopeValues, next string, err error)

// Dispatch publishes one sweep message per scope of the tick's workflow that has work (every
// scope, without probes). An invalid tick is a *contract.ValidationError and publishes
// nothing. It returns an error, with the report, when enumeration failed or any message could
// not be published: the tick is then worth delivering again, and the runs it already started
// are skipped as duplicates.
func (d *Dispatcher) Dispatch(ctx context.Context, tick Tick) (Report, error) {
	rep := Report{WorkflowType: string(tick.WorkflowType), TickID: tick.TickID}
	def, defaults, explicit, err := d.validate(tick)
	if err != nil {
		return rep, err
	}
	kind, fields := def.Scope.Kind, def.Scope.Names()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Budget)
	defer cancel()
	started := time.Now()

	// A tick naming an organization that opted out publishes nothing: the opt-out holds
	// whatever a message names.
	if org := explicitOrg(kind, defaults); org != "" {
		ok, err := d.orgs.Enabled(ctx, org)
		if err != nil {
			return rep, fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
		}
		if !ok {
			rep.Disabled = 1
			d.log.Warn("the tick names an organization that opted out of sweeps; nothing published",
				"organization_uuid", org, "workflow_type", string(tick.WorkflowType), "claimed_actor", tick.ClaimedActor)
			return rep, nil
		}
	}

	now, clocked := d.now(ctx, tick)
	paused := d.paused(ctx, tick, now, clocked)
	if p := pausestore.ActivePause(paused, pauseTime(now, clocked)); p != nil && p.Fleet() {
		rep.PausedFleet = true
		d.log.Warn("the workflow is paused fleet-wide; nothing published", "workflow_type", string(tick.WorkflowType), "pause", p.String())
		return rep, nil
	}
	orgs := d.organizations(tick, now, clocked, &rep)
	next, err := d.pager(tick, kind, defaults, explicit, orgs, &rep)
	if err != nil {
		return rep, err
	}
	probe := d.prober(ctx, def, tick, defaults, fields, now, clocked, &rep)
	after := tick.After
	for {
		scopes, resume, err := next(ctx, after)
		if err != nil {
			return rep, fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
		}
		rep.Scopes += len(scopes)
		scopes = d.unpaused(tick, scopes, paused, &rep)
		if err := d.publish(ctx, tick, defaults, fields, probe(scopes), &rep); err != nil {
			return rep, err
		}
		if resume == "" {
			break
		}
		after = resume
		if ctx.Err() != nil {
			rep.OutOfBudget = true
			break
		}
		if d.ticksTopic != "" && (rep.Scopes >= d.cfg.ShardScopes || time.Since(started) > d.cfg.Budget*3/4) {
			building := orgs.save(ctx)
			if err := d.continueAfter(ctx, tick, after, building); err != nil {
				return rep, fmt.Errorf("dispatch %s: hand the rest of the tick on: %w", tick.WorkflowType, err)
			}
			rep.Continued = after
			break
		}
	}
	if rep.Continued == "" && !rep.OutOfBudget && orgs.save(ctx) {
		rep.RosterFinished = orgs.finish(ctx)
	}
	if rep.Deferred > 0 || (rep.OutOfBudget && rep.Continued == "") {
		d.log.Warn("dispatch ran out of budget: scopes of the tick were not published; the tick is delivered again", alerts.DispatchDeferred.Attr(),
			"workflow_type", string(tick.WorkflowType), "tick_id", tick.TickID, "deferred", rep.Deferred, "published", rep.Published, "scopes", rep.Scopes)
	}
	if rep.Failed > 0 || rep.Deferred > 0 || (rep.OutOfBudget && rep.Continued == "") {
		return rep, fmt.Errorf("dispatch %s: %d sweep messages failed to publish, %d deferred, out of budget %t",
			tick.WorkflowType, rep.Failed, rep.Deferred, rep.OutOfBudget)
	}
	return rep, nil
}

// pager is how a tick's scopes are enumerated, page by page.
func (d *Dispatcher) pager(tick Tick, kind contract.ScopeKind, defaults map[string]json.RawMessage, explicit string, orgs *organizations, rep *Report) (page, error) {
	one := func(scopes ...workflow.ScopeValues) page {
		return func(context.Context, string) ([]workflow.ScopeValues, string, error) { return scopes, "", nil }
	}
	switch {
	case kind == contract.ScopeRunnerGroup && d.groups != nil:
		var org, group string
		_ = json.Unmarshal(defaults["organization_uuid"], &org)
		_ = json.Unmarshal(defaults["runner_group_uuid"], &group)
		switch {
		case org != "" && group != "":
			return one(workflow.ScopeValues{org, group}), nil
		case org != "":
			return func(ctx context.Context, _ string) ([]workflow.ScopeValues, string, error) {
				scopes, err := d.groupsOf(ctx, []string{org}, tick, rep)
				return scopes, "", err
			}, nil
		}
		return func(ctx context.Context, after string) ([]workflow.ScopeValues, string, error) {
			ids, resume, err := orgs.page(ctx, after)
			if err != nil {
				return nil, "", err
			}
			scopes, err := d.groupsOf(ctx, ids, tick, rep)
			return scopes, resume, err
		}, nil
	case kind == contract.ScopeFleet:
		return one(nil), nil
	case explicit != "":
		return one(workflow.ScopeValues{explicit}), nil
	case kind == contract.ScopeOrganization:
		return func(ctx context.Context, after string) ([]workflow.ScopeValues, string, error) {
			ids, resume, err := orgs.page(ctx, after)
			return values(ids), resume, err
		}, nil
	case kind == contract.ScopeQueue && d.queues != nil:
		return func(ctx context.Context, _ string) ([]workflow.ScopeValues, string, error) {
			queues, err := d.queues(ctx, d.cfg.ListMax)
			if len(queues) >= d.cfg.ListMax {
				rep.Capped = true
				d.log.Warn("queues listed up to the dispatch's list limit; the rest are not swept this tick", alerts.DispatchCapped.Attr(),
					"list_max", d.cfg.ListMax, "workflow_type", string(tick.WorkflowType))
			}
			return values(queues), "", err
		}, nil
	}
	return nil, contract.Invalid("workflow_type", "enum", "dispatching %s scopes (%s) is not available in this build", kind, tick.WorkflowType)
}

// enabled is one page (as page) of enabled organizations.
func (d *Dispatcher) enabled(ctx context.Context, after string) ([]string, string, error) {
	ids, err := d.orgs.ListEnabled(ctx, after, d.cfg.PageSize)
	if err != nil || len(ids) < d.cfg.PageSize {
		return ids, "", err
	}
	return ids, ids[len(ids)-1], nil
}

// groupsOf lists the runner groups of each organization as scopes.
func (d *Dispatcher) groupsOf(ctx context.Context, orgs []string, tick Tick, rep *Report) ([]workflow.ScopeValues, error) {
	var scopes []workflow.ScopeValues
	for _, org := range orgs {
		groups, err := d.groups(ctx, org, d.cfg.ListMax)
		if err != nil {
			return nil, err
		}
		if len(groups) >= d.cfg.ListMax {
			rep.Capped = true
			d.log.Warn("runner groups listed up to the dispatch's list limit; the rest are not swept this tick", alerts.DispatchCapped.Attr(),
				"organization_uuid", org, "list_max", d.cfg.ListMax, "workflow_type", string(tick.WorkflowType))
		}
		for _, g := range groups {
			scopes = append(scopes, workflow.ScopeValues{org, g})
		}
	}
	return scopes, nil
}

// prober narrows a page of scopes to the ones with work, when probes are on and the workflow has one.
func (d *Dispatcher) prober(ctx context.Context, def workflow.Definition, tick Tick, defaults map[string]json.RawMessage, fields []string, now time.Time, clocked bool, rep *Report) func([]workflow.ScopeValues) []workflow.ScopeValues {
	if d.clock == nil || !clocked || def.Probe == nil {
		return func(scopes []workflow.ScopeValues) []workflow.ScopeValues { return scopes }
	}
	batch := max(def.ProbeBatch, 1)
	return func(scopes []workflow.ScopeValues) []workflow.ScopeValues {
		work := make([]bool, len(scopes))
		var errs atomic.Int64
		failed := func(scope workflow.ScopeValues, err error) {
			if errs.Add(1) == 1 {
				d.log.Warn("probe failed; the scope's sweep is published", "scope", scope.Key(), "error", err.Error())
			}
		}
		batches := (len(scopes) + batch - 1) / batch
		parallel.ForEach(ctx, batches, d.cfg.ProbeConcurrency, func(b int) bool {
			lo, hi := b*batch, min((b+1)*batch, len(scopes))
			var asked []int
			var inputs []json.RawMessage
			for i := lo; i < hi; i++ {
				input, err := contract.Validate(tick.WorkflowType, scopeInput(defaults, fields, scopes[i]))
				if err != nil {
					work[i] = true // a probe never hides work
					failed(scopes[i], err)
					continue
				}
				asked, inputs = append(asked, i), append(inputs, input)
			}
			if len(inputs) == 0 {
				return false
			}
			found, err := def.Probe(ctx, inputs, now)
			if err == nil && len(found) != len(inputs) {
				err = fmt.Errorf("the probe answered %d of %d scopes", len(found), len(inputs))
			}
			for k, i := range asked {
				if err != nil {
					work[i] = true // a probe never hides work
					failed(scopes[i], err)
					continue
				}
				work[i] = found[k]
			}
			return false
		})
		var out []workflow.ScopeValues
		for i, w := range work {
			if w {
				out = append(out, scopes[i])
			}
		}
		rep.Probed += len(scopes)
		rep.Quiet += len(scopes) - len(out)
		rep.ProbeErrors += int(errs.Load())
		return out
	}
}

func (d *Dispatcher) publish(ctx context.Context, tick Tick, defaults map[string]json.RawMessage, fields []string, scopes []workflow.ScopeValues, rep *Report) error {
	if len(scopes) == 0 {
		return nil
	}
	msgs := make([]message.Outgoing, 0, len(scopes))
	for _, scope := range scopes {
		m, err := d.sweepMessage(tick, defaults, fields, scope)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	for _, r := range d.pub.PublishBatch(ctx, d.topic, msgs) {
		switch {
		case r.Err == nil:
			rep.Published++
		case ctx.Err() != nil:
			rep.Deferred++
			rep.OutOfBudget = true
		default:
			rep.Failed++
			d.log.Warn("sweep message not published", "error", r.Err.Error())
		}
	}
	return nil
}

// now reads the clock once per invocation: Firestore's when probes are on, else this machine's.
// false when the clock could not be read: then nothing is probed and the roster is not used.
func (d *Dispatcher) now(ctx context.Context, tick Tick) (time.Time, bool) {
	if d.clock == nil {
		return time.Now(), true
	}
	now, err := d.clock(ctx)
	if err != nil {
		d.log.Warn("no clock: every scope is published, and the organizations are listed", "error", err.Error(), "workflow_type", string(tick.WorkflowType))
		return time.Time{}, false
	}
	return now, true
}

// paused is the workflow's pauses that hold now, read once per invocation; none when pauses are
// off or the read failed (each run's start checks again).
func (d *Dispatcher) paused(ctx context.Context, tick Tick, now time.Time, clocked bool) []pausestore.Pause {
	if d.pauses == nil {
		return nil
	}
	all, err := d.pauses.List(ctx, string(tick.WorkflowType), pausestore.PauseListMax)
	if err != nil {
		d.log.Warn("could not read the workflow's pauses; every scope is published, and each run checks its pause when it starts",
			"workflow_type", string(tick.WorkflowType), "error", err.Error())
		return nil
	}
	if len(all) >= pausestore.PauseListMax {
		d.log.Warn("pauses listed up to their bound; the rest are checked when each run starts", "workflow_type", string(tick.WorkflowType), "list_max", pausestore.PauseListMax)
	}
	at := pauseTime(now, clocked)
	var out []pausestore.Pause
	for _, p := range all {
		if p.Active(at) {
			out = append(out, p)
		}
	}
	return out
}

// pauseTime is when a pause's end is judged: the invocation's clock, else this machine's.
func pauseTime(now time.Time, clocked bool) time.Time {
	if !clocked {
		return time.Now()
	}
	return now
}

// unpaused drops the scopes a pause covers, counting them.
func (d *Dispatcher) unpaused(tick Tick, scopes []workflow.ScopeValues, paused []pausestore.Pause, rep *Report) []workflow.ScopeValues {
	if len(paused) == 0 {
		return scopes
	}
	out := scopes[:0:0]
	for _, s := range scopes {
		key := s.Key()
		covered := false
		for _, p := range paused {
			if p.Covers(key) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
			continue
		}
		rep.Paused++
		d.log.Info("the workflow is paused on this scope; its sweep is not published", "workflow_type", string(tick.WorkflowType), "scope", key)
	}
	return out
}

// continueAfter hands the rest of the tick on to the ticks topic, still building the roster if building.
func (d *Dispatcher) continueAfter(ctx context.Context, tick Tick, after string, building bool) error {
	attrs := message.ContinuationAttributes{Trigger: cmp.Or(tick.Trigger, "schedule"), ClaimedActor: tick.ClaimedActor, TickID: tick.TickID, After: after}
	if building {
		attrs.Roster = message.RosterBuild
	}
	msg, err := message.EncodeContinuation(message.Start{WorkflowType: tick.WorkflowType, InitialData: tick.InitialData}, attrs)
	if err != nil {
		return err
	}
	return d.pub.PublishBatch(ctx, d.ticksTopic, []message.Outgoing{msg})[0].Err
}

// explicitOrg is the organization an organization- or group-scoped tick names itself, or "".
func explicitOrg(kind contract.ScopeKind, defaults map[string]json.RawMessage) string {
	if kind != contract.ScopeOrganization && kind != contract.ScopeRunnerGroup {
		return ""
	}
	var org string
	_ = json.Unmarshal(defaults["organization_uuid"], &org)
	return org
}

// validate checks the tick and returns its workflow, its defaults as an object, and the scope
// it names explicitly ("" when it names none).
func (d *Dispatcher) validate(tick Tick) (workflow.Definition, map[string]json.RawMessage, string, error) {
	def, ok := d.workflows.Definition(tick.WorkflowType)
	if !ok {
		return def, nil, "", contract.Invalid("workflow_type", "enum", "workflow type %q is not implemented in this build", tick.WorkflowType)
	}
	defaults := map[string]json.RawMessage{}
	if raw := bytes.TrimSpace(tick.InitialData); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &defaults); err != nil {
			return def, nil, "", contract.Invalid("initial_data", "type", "must be a JSON object")
		}
	}
	explicit := ""
	probe := map[string]json.RawMessage{}
	for k, v := range defaults {
		probe[k] = v
	}
	for _, f := range def.Scope.Fields {
		if v, ok := defaults[f.Name]; ok {
			var s string
			_ = json.Unmarshal(v, &s)
			explicit = s
			continue
		}
		probe[f.Name], _ = json.Marshal(f.Example)
	}
	raw, _ := json.Marshal(probe)
	input, err := contract.Validate(tick.WorkflowType, raw)
	if err != nil {
		return def, nil, "", err
	}
	if def.Scheduled != nil {
		if err := def.Scheduled(input); err != nil {
			return def, nil, "", err
		}
	}
	return def, defaults, explicit, nil
}

// values makes each id a one-field scope.
func values(ids []string) []workflow.ScopeValues {
	out := make([]workflow.ScopeValues, len(ids))
	for i, id := range ids {
		out[i] = workflow.ScopeValues{id}
	}
	return out
}

// sweepMessage builds the sweep message of one scope (scopeInput, RunUUID).
func (d *Dispatcher) sweepMessage(tick Tick, defaults map[string]json.RawMessage, fields []string, scope workflow.ScopeValues) (message.Outgoing, error) {
	return message.EncodeSweep(message.Start{WorkflowType: tick.WorkflowType, InitialData: scopeInput(defaults, fields, scope)}, message.SweepAttributes{
		Trigger:         cmp.Or(tick.Trigger, "schedule"),
		ClaimedActor:    tick.ClaimedActor,
		WorkflowRunUUID: RunUUID(tick.TickID, tick.WorkflowType, scope.Key()),
		TickID:          tick.TickID,
	})
}

// scopeInput is one scope's initial data: the tick's defaults with the scope's fields set.
func scopeInput(defaults map[string]json.RawMessage, fields []string, scope workflow.ScopeValues) json.RawMessage {
	data := map[string]json.RawMessage{}
	for k, v := range defaults {
		data[k] = v
	}
	for i, v := range scope {
		data[fields[i]], _ = json.Marshal(v)
	}
	out, _ := json.Marshal(data)
	return out
}

// runNamespace is the UUID namespace of the runs a tick starts.
var runNamespace = uuid.MustParse("6f1d3c2e-8a44-4f7e-9a53-51b0e6c2d7a1")

// RunUUID is the uuid of the run a tick starts on a scope: the same for every delivery of the
// same tick, different for every other tick. Without a tick id it is random.
func RunUUID(tickID string, t contract.WorkflowType, scope string) string {
	if tickID == "" {
		return uuid.NewString()
	}
	return uuid.NewSHA1(runNamespace, []byte(tickID+"\n"+string(t)+"\n"+scope)).String()
}
