package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Tick asks for one run of a workflow on every scope it covers.
type Tick struct {
	WorkflowType contract.WorkflowType
	// InitialData holds the defaults of every run (min_age_seconds, limit, ...). When it names
	// a scope itself (an organization_uuid), only that scope is dispatched.
	InitialData json.RawMessage
	Trigger     string
	// Actor is who sent the tick as far as it was verified (the subscription it came through);
	// ClaimedActor is who the tick says sent it. The sweep messages carry the claim on, as a
	// claim.
	Actor        string
	ClaimedActor string
	// TickID is the tick message's id. The runs' uuids derive from it, so a redelivered tick
	// names the same runs and they are not run twice.
	TickID string
}

// Defaults of DispatchConfig.
const (
	PageSizeDefault  = 500
	MaxScopesDefault = 10000
	BudgetDefault    = 60 * time.Second
)

// DispatchConfig bounds one dispatch. Zero values take the defaults.
type DispatchConfig struct {
	PageSize  int           // scopes read per query
	MaxScopes int           // scopes dispatched per tick at most
	Budget    time.Duration // the whole dispatch
}

// Report is what one dispatch did.
type Report struct {
	WorkflowType string `json:"workflow_type"`
	TickID       string `json:"tick_id"`
	Scopes       int    `json:"scopes"`    // scopes enumerated
	Published    int    `json:"published"` // sweep messages Pub/Sub acknowledged
	Failed       int    `json:"failed"`    // sweep messages that failed to publish
	Deferred     int    `json:"deferred"`  // enumerated but not published before the budget ran out
	Disabled     int    `json:"disabled"`  // named by the tick, but opted out of sweeps: not published
	Capped       bool   `json:"capped"`    // enumeration stopped at MaxScopes
	OutOfBudget  bool   `json:"out_of_budget"`
}

// Workflows are the workflows a dispatcher dispatches: their declared scopes and the rules the
// scheduled path applies. *workflow.Engine is one.
type Workflows interface {
	Definition(t contract.WorkflowType) (workflow.Definition, bool)
}

// Dispatcher turns a tick into sweep messages.
type Dispatcher struct {
	orgs      *ledger.OrganizationStore
	pub       Publisher
	topic     string
	cfg       DispatchConfig
	log       *slog.Logger
	workflows Workflows
	queues    func(ctx context.Context, limit int) ([]string, error)
	groups    func(ctx context.Context, org string, limit int) ([]string, error)
}

// ListGroupsWith sets how runner-group-scoped workflows (runner.workspace-lease-settle)
// enumerate the groups of an organization.
func (d *Dispatcher) ListGroupsWith(list func(ctx context.Context, org string, limit int) ([]string, error)) {
	d.groups = list
}

// ListQueuesWith sets how queue-scoped workflows (pm.sweep) enumerate their scopes.
func (d *Dispatcher) ListQueuesWith(list func(ctx context.Context, limit int) ([]string, error)) {
	d.queues = list
}

// NewDispatcher returns a dispatcher publishing to the sweeps topic the runs of workflows.
func NewDispatcher(orgs *ledger.OrganizationStore, pub Publisher, sweepsTopic string, cfg DispatchConfig, log *slog.Logger, workflows Workflows) *Dispatcher {
	cfg.PageSize = cmp.Or(cfg.PageSize, PageSizeDefault)
	cfg.MaxScopes = cmp.Or(cfg.MaxScopes, MaxScopesDefault)
	cfg.Budget = cmp.Or(cfg.Budget, BudgetDefault)
	return &Dispatcher{orgs: orgs, pub: pub, topic: sweepsTopic, cfg: cfg, log: log, workflows: workflows}
}

// Dispatch publishes one sweep message per scope of the tick's workflow. An invalid tick is a
// *contract.ValidationError and publishes nothing. It returns an error, with the report, when
// enumeration failed or any message could not be published: the tick is then worth delivering
// again, and the runs it already started are skipped as duplicates.
func (d *Dispatcher) Dispatch(ctx context.Context, tick Tick) (Report, error) {
	rep := Report{WorkflowType: string(tick.WorkflowType), TickID: tick.TickID}
	def, defaults, explicit, err := d.validate(tick)
	if err != nil {
		return rep, err
	}
	kind, fields := def.Scope.Kind, def.Scope.Names()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Budget)
	defer cancel()

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

	publish := func(scopes []workflow.ScopeValues) error {
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

	switch {
	case kind == contract.ScopeRunnerGroup && d.groups != nil:
		if err := d.dispatchGroups(ctx, tick, defaults, &rep, publish); err != nil {
			return rep, err
		}
	case kind == contract.ScopeFleet:
		rep.Scopes = 1
		if err := publish([]workflow.ScopeValues{nil}); err != nil {
			return rep, err
		}
	case explicit != "":
		rep.Scopes = 1
		if err := publish([]workflow.ScopeValues{{explicit}}); err != nil {
			return rep, err
		}
	case kind == contract.ScopeOrganization:
		after := ""
		for rep.Scopes < d.cfg.MaxScopes {
			if ctx.Err() != nil {
				rep.OutOfBudget = true
				break
			}
			ids, err := d.orgs.ListEnabled(ctx, after, min(d.cfg.PageSize, d.cfg.MaxScopes-rep.Scopes))
			if err != nil {
				return rep, fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
			}
			rep.Scopes += len(ids)
			if err := publish(values(ids)); err != nil {
				return rep, err
			}
			if len(ids) < d.cfg.PageSize {
				break
			}
			after = ids[len(ids)-1]
		}
		rep.Capped = rep.Scopes >= d.cfg.MaxScopes
	case kind == contract.ScopeQueue && d.queues != nil:
		queues, err := d.queues(ctx, d.cfg.MaxScopes)
		if err != nil {
			return rep, fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
		}
		rep.Scopes, rep.Capped = len(queues), len(queues) >= d.cfg.MaxScopes
		for start := 0; start < len(queues); start += d.cfg.PageSize {
			if ctx.Err() != nil {
				rep.Deferred += len(queues) - start
				rep.OutOfBudget = true
				break
			}
			if err := publish(values(queues[start:min(start+d.cfg.PageSize, len(queues))])); err != nil {
				return rep, err
			}
		}
	default:
		return rep, contract.Invalid("workflow_type", "enum", "dispatching %s scopes (%s) is not available in this build", kind, tick.WorkflowType)
	}
	if rep.Failed > 0 || rep.Deferred > 0 {
		return rep, fmt.Errorf("dispatch %s: %d sweep messages failed to publish, %d deferred", tick.WorkflowType, rep.Failed, rep.Deferred)
	}
	return rep, nil
}

// explicitOrg is the organization a tick of an organization- or group-scoped workflow names
// itself, or "".
func explicitOrg(kind contract.ScopeKind, defaults map[string]json.RawMessage) string {
	if kind != contract.ScopeOrganization && kind != contract.ScopeRunnerGroup {
		return ""
	}
	var org string
	_ = json.Unmarshal(defaults["organization_uuid"], &org)
	return org
}

// dispatchGroups publishes one message per runner group: of the organization the tick names,
// or of every enabled organization; a tick naming a group as well publishes just that one.
func (d *Dispatcher) dispatchGroups(ctx context.Context, tick Tick, defaults map[string]json.RawMessage, rep *Report, publish func([]workflow.ScopeValues) error) error {
	var org, group string
	_ = json.Unmarshal(defaults["organization_uuid"], &org)
	_ = json.Unmarshal(defaults["runner_group_uuid"], &group)
	if org != "" && group != "" {
		rep.Scopes = 1
		return publish([]workflow.ScopeValues{{org, group}})
	}
	orgs := []string{org}
	after := ""
	for org == "" && rep.Scopes < d.cfg.MaxScopes {
		ids, err := d.orgs.ListEnabled(ctx, after, d.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
		}
		if err := d.publishGroups(ctx, tick, ids, rep, publish); err != nil {
			return err
		}
		if len(ids) < d.cfg.PageSize || ctx.Err() != nil {
			return nil
		}
		after = ids[len(ids)-1]
	}
	if org != "" {
		return d.publishGroups(ctx, tick, orgs, rep, publish)
	}
	rep.Capped = true
	return nil
}

func (d *Dispatcher) publishGroups(ctx context.Context, tick Tick, orgs []string, rep *Report, publish func([]workflow.ScopeValues) error) error {
	for _, org := range orgs {
		if ctx.Err() != nil {
			rep.OutOfBudget = true
			return nil
		}
		left := d.cfg.MaxScopes - rep.Scopes
		if left <= 0 {
			rep.Capped = true
			return nil
		}
		groups, err := d.groups(ctx, org, left)
		if err != nil {
			return fmt.Errorf("dispatch %s: %w", tick.WorkflowType, err)
		}
		scopes := make([]workflow.ScopeValues, len(groups))
		for i, g := range groups {
			scopes[i] = workflow.ScopeValues{org, g}
		}
		rep.Scopes += len(scopes)
		if len(scopes) > 0 {
			if err := publish(scopes); err != nil {
				return err
			}
		}
	}
	return nil
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

// sweepMessage builds the sweep message of one scope: the tick's defaults with the scope's
// fields set to its values.
func (d *Dispatcher) sweepMessage(tick Tick, defaults map[string]json.RawMessage, fields []string, scope workflow.ScopeValues) (message.Outgoing, error) {
	data := map[string]json.RawMessage{}
	for k, v := range defaults {
		data[k] = v
	}
	for i, v := range scope {
		data[fields[i]], _ = json.Marshal(v)
	}
	initial, _ := json.Marshal(data)
	return message.EncodeSweep(message.Start{WorkflowType: tick.WorkflowType, InitialData: initial}, message.SweepAttributes{
		Trigger:         cmp.Or(tick.Trigger, "schedule"),
		ClaimedActor:    tick.ClaimedActor,
		WorkflowRunUUID: RunUUID(tick.TickID, tick.WorkflowType, scope.Key()),
		TickID:          tick.TickID,
	})
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
