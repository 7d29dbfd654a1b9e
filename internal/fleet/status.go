package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Bounds of StatusConfig.Limit: how many scopes each list shows.
const (
	StatusLimitDefault = 20
	StatusLimitMax     = 1000
)

// TickDataDefault is the initial_data each scheduled tick carries by default: the Terraform
// module's scheduler_jobs default. A deployment that sets its own passes it as StatusConfig.Data.
var TickDataDefault = map[contract.WorkflowType]string{
	contract.ExecutionSyncCloudRun:   `{"min_age_seconds": 60, "limit": 25}`,
	contract.ExecutionSyncKubernetes: `{"min_age_seconds": 60, "limit": 25}`,
	contract.WorkspaceLeaseSettle:    `{"max_settlements": 50}`,
	contract.ExtensionRunsSweep:      `{"older_than_ms": 900000, "limit": 200}`,
	contract.PMSweep:                 `{"ttl": 300}`,
}

// Fleet is what the fleet view reads with: a Firestore connection opened with ReadOnly, and the
// workflows and dispatch settings of the process (app.App's).
type Fleet struct {
	Firestore *firestore.Client
	// Workflows are the definitions the dispatcher probes with (*workflow.Engine).
	Workflows    pipeline.Workflows
	Declared     workflow.Declarations
	Dispatch     pipeline.DispatchConfig
	RosterMaxAge time.Duration // as app.Config's: negative, no roster
	Retention    ledger.Retention
	// Kinds are the execution syncs: a scope with work of one shows its oldest stale row.
	Kinds []executionsync.Kind
}

// StatusConfig says what to show.
type StatusConfig struct {
	Limit int // scopes shown per list; 0 is StatusLimitDefault, at most StatusLimitMax
	// Data overrides TickDataDefault, by workflow type.
	Data map[contract.WorkflowType]json.RawMessage
}

// Status is what the next tick would do, fleet-wide.
type Status struct {
	At        time.Time        `json:"at"` // Firestore's clock
	Workflows []WorkflowStatus `json:"workflows"`
	// OptedOut lists organizations whose sweeps_enabled is false (documents without the field
	// are not swept either, but no query finds them); OptedOutMore says the list was cut.
	OptedOut     []string `json:"opted_out"`
	OptedOutMore bool     `json:"opted_out_more"`
	// BlindTargets are the executor targets the blind-executor guard last judged blind: their
	// rows are not settled lost.
	BlindTargets []BlindTarget `json:"blind_targets"`
}

// BlindTarget is one executor target judged blind.
type BlindTarget struct {
	Target     string    `json:"target"`
	BlindSince time.Time `json:"blind_since,omitzero"`
	JudgedAt   time.Time `json:"judged_at"`
	Asked      int64     `json:"asked"`
	Unknown    int64     `json:"unknown"`
}

// WorkflowStatus is what the next tick of one workflow would do.
type WorkflowStatus struct {
	WorkflowType string `json:"workflow_type"`
	// Dispatch is the dispatcher's own report: scopes enumerated, probed, quiet, paused, and
	// "published", which here means the scopes with work (nothing is published).
	Dispatch pipeline.Report `json:"dispatch"`
	// Work lists the scopes a tick would start a run on, at most the limit; WorkMore how many
	// more there are.
	Work     []ScopeWork `json:"work"`
	WorkMore int         `json:"work_more"`
	// Paused lists the pauses that hold on the workflow (pausestore.PauseListMax at most read).
	Paused  []pausestore.Pause `json:"paused"`
	LastRun *LastRun           `json:"last_run"`
	// Error says why the dispatcher stopped (out of budget, a tick it refused).
	Error string `json:"error,omitempty"`
}

// ScopeWork is one scope with work, and for an execution sync its oldest stale row.
type ScopeWork struct {
	Scope       string    `json:"scope"`
	OldestStale *StaleRow `json:"oldest_stale,omitempty"`
}

// Status asks the dispatcher, as a tick would and at its cost, which scopes of each workflow
// have work, and adds what it does not say: the oldest stale row of each execution-sync scope
// shown (one query of one document each), the pauses, the newest run of each workflow, the
// organizations opted out and the blind targets.
func (f Fleet) Status(ctx context.Context, cfg StatusConfig) (Status, error) {
	limit := cfg.Limit
	if limit <= 0 {
		limit = StatusLimitDefault
	}
	limit = min(limit, StatusLimitMax)
	now, err := firestoreconn.ServerClock(f.Firestore)(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("read Firestore's clock: %w", err)
	}
	st := Status{At: now, Workflows: []WorkflowStatus{}, BlindTargets: []BlindTarget{}}
	orgs := orgadmin.New(f.Firestore)
	admin := orgadmin.New(f.Firestore)
	reader := Reader{Orgs: admin, Runs: runstore.New(f.Firestore), Executions: ledger.NewExecutionStore(f.Firestore, ledger.TxConfig{}, ledger.Retention{}), Workflows: f.Declared, Kinds: f.Kinds}
	pauses := pausestore.New(f.Firestore)
	for _, t := range f.Declared.Types() {
		ws, err := f.workflow(ctx, t, cfg, limit, now, reader, orgs, pauses)
		if err != nil {
			return Status{}, err
		}
		st.Workflows = append(st.Workflows, ws)
	}
	off, err := admin.ListDisabled(ctx, "", limit+1)
	if err != nil {
		return Status{}, err
	}
	if len(off) > limit {
		off, st.OptedOutMore = off[:limit], true
	}
	st.OptedOut = off
	targets, err := targetstore.New(f.Firestore, ledger.Retention{}).List(ctx, StatusLimitMax)
	if err != nil {
		return Status{}, err
	}
	for _, t := range targets {
		if t.Blind {
			st.BlindTargets = append(st.BlindTargets, BlindTarget{Target: t.Target, BlindSince: t.BlindSince, JudgedAt: t.JudgedAt, Asked: t.Asked, Unknown: t.Unknown})
		}
	}
	return st, nil
}

func (f Fleet) workflow(ctx context.Context, t contract.WorkflowType, cfg StatusConfig, limit int, now time.Time, reader Reader, orgs *orgadmin.Store, pauses *pausestore.Store) (WorkflowStatus, error) {
	ws := WorkflowStatus{WorkflowType: string(t), Work: []ScopeWork{}, Paused: []pausestore.Pause{}}
	data := cfg.Data[t]
	if data == nil {
		data = json.RawMessage(TickDataDefault[t])
	}
	rec := &recorder{keep: limit}
	o := pipeline.DispatcherOptions{
		Orgs: orgs, Publisher: rec, SweepsTopic: "stalesweep-status", Workflows: f.Workflows,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: f.Dispatch,
		ListQueues: ledger.NewTaskStore(f.Firestore, ledger.TxConfig{}).ListQueues,
		ListGroups: ledger.NewLeaseStore(f.Firestore, ledger.TxConfig{}).ListGroups,
		Pauses:     pauses,
		Probe:      firestoreconn.ServerClock(f.Firestore),
	}
	if f.RosterMaxAge >= 0 {
		o.Roster, o.RosterMaxAge = rosterstore.New(f.Firestore, f.Retention, time.Now), f.RosterMaxAge
	}
	d := pipeline.NewDispatcher(o)
	// A tick id lets the dispatcher read the roster; it names no run, since nothing is published.
	rep, err := d.Dispatch(ctx, pipeline.Tick{WorkflowType: t, InitialData: data, Trigger: "schedule", TickID: "status-" + uuid.NewString()})
	ws.Dispatch = rep
	if err != nil {
		if contract.CodeOf(err) == contract.CodeValidationFailed {
			ws.Error = "the tick's initial_data is refused: " + err.Error()
		} else if ctx.Err() == nil && rep.OutOfBudget {
			ws.Error = err.Error()
		} else {
			return ws, fmt.Errorf("status of %s: %w", t, err)
		}
	}
	def, _ := f.Workflows.Definition(t)
	var kind *executionsync.Kind
	for i := range f.Kinds {
		if f.Kinds[i].Type == t {
			kind = &f.Kinds[i]
		}
	}
	for _, in := range rec.kept {
		w := ScopeWork{Scope: def.Scope.Key(in)}
		if org, ok := def.Scope.Organization(in); ok && kind != nil {
			var age struct {
				MinAgeSeconds int64 `json:"min_age_seconds"`
			}
			_ = json.Unmarshal(in, &age)
			row, found, err := reader.OldestStale(ctx, org, kind.Provider, now, time.Duration(age.MinAgeSeconds)*time.Second)
			if err != nil {
				return ws, fmt.Errorf("status of %s: %w", t, err)
			}
			if found {
				w.OldestStale = &row
			}
		}
		ws.Work = append(ws.Work, w)
	}
	ws.WorkMore = rec.more
	all, err := pauses.List(ctx, string(t), pausestore.PauseListMax)
	if err != nil {
		return ws, err
	}
	for _, p := range all {
		if p.Active(now) {
			ws.Paused = append(ws.Paused, p)
		}
	}
	run, ok, err := reader.LastRun(ctx, t, "")
	if err != nil {
		return ws, err
	}
	if ok {
		ws.LastRun = &run
	}
	return ws, nil
}

// recorder is the dispatcher's publisher in the fleet view: it acknowledges every message,
// keeps the validated input of the first `keep` sweeps and counts the rest.
type recorder struct {
	mu   sync.Mutex
	keep int
	kept []json.RawMessage
	more int
}

func (r *recorder) PublishBatch(_ context.Context, _ string, msgs []message.Outgoing) []pipeline.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]pipeline.Result, len(msgs))
	for i, m := range msgs {
		out[i] = pipeline.Result{ID: fmt.Sprintf("status-%d", len(r.kept)+r.more)}
		if len(r.kept) >= r.keep {
			r.more++
			continue
		}
		// The sweep's input as its run would get it, defaults filled in.
		start, err := message.DecodeStart(bytes.NewReader(m.Data))
		if err == nil {
			start.InitialData, err = contract.Validate(start.WorkflowType, start.InitialData)
		}
		if err != nil {
			r.more++
			continue
		}
		r.kept = append(r.kept, start.InitialData)
	}
	return out
}
