// Package demo is stalesweep's main job on a fresh machine: it starts what it needs (the
// Firestore emulator through gcloud unless FIRESTORE_EMULATOR_HOST names one, and the Cloud Run
// fake in process), seeds an organization with 240 runner executions covering every case plus a
// second organization that must stay untouched, runs runner.execution-sync-stale-cloud-run until
// nothing stale is left to settle, checks every row against what it should have become, and
// prints a summary. It stops everything it started.
package demo

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// Options tunes the demo. Zero values take the defaults.
type Options struct {
	Out       io.Writer     // progress and summary
	Log       *slog.Logger  // the workflows' logs; nil discards them
	Verbose   bool          // in pipeline mode, let the functions' own logs through too
	Limit     int           // rows per run (default 50)
	LostGrace time.Duration // how long a missing execution stays unknown (default 3s, to keep the demo short)
	Pause     time.Duration // between runs (default 250ms)
	MaxRuns   int           // give up after this many runs (default 60)
	// Pipeline runs every round through the deployed shape: a tick published to the Pub/Sub
	// emulator, pushed to the functions served in this process (Dispatch → Sweep →
	// SyncExecution). In both modes the second organization has opted out of sweeps.
	Pipeline bool
}

// roundResult is what one run (inline) or one tick (pipeline) did to the demo organization.
type roundResult struct {
	candidates, started, skipped, failed int
	settled                              map[string]int
	refreshed, unknown                   int
}

// round sweeps once.
type round func(ctx context.Context) (roundResult, error)

// inlineRounds runs the workflow in this process, syncs inline, on the engine app.New builds as
// the command does: the opt-out, pause and blind-executor checks of a deployment included.
func inlineRounds(ctx context.Context, o Options, fake *cloudrunfake.Server, project, org string) (round, func(), error) {
	env := map[string]string{
		"GOOGLE_CLOUD_PROJECT":  project,
		app.EnvCloudRunEndpoint: fake.Addr,
		app.EnvLostGrace:        o.LostGrace.String(),
	}
	cfg, err := app.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		return nil, nil, err
	}
	a, err := app.New(ctx, cfg, o.Log, time.Now, app.Parts{})
	if err != nil {
		return nil, nil, err
	}
	engine := a.Engine
	input, _ := json.Marshal(map[string]any{"organization_uuid": org, "limit": o.Limit})
	return func(ctx context.Context) (roundResult, error) {
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: input, Trigger: workflow.TriggerLocal, Actor: "demo"})
		if err != nil {
			return roundResult{}, err
		}
		if out.Status != workflow.StateCompleted {
			return roundResult{}, fmt.Errorf("run %s failed: %v", out.RunUUID, out.Err)
		}
		var o executionsync.Output
		var st executionsync.Stats
		decode(out.Output, &o)
		decode(out.Stats, &st)
		return roundResult{candidates: o.CandidateCount, started: o.StartedCount, skipped: o.SkippedMissingMetadataCount,
			failed: o.FailedStartCount, settled: st.Settled, refreshed: st.Refreshed, unknown: st.Unknown}, nil
	}, func() { _ = a.Close() }, nil
}

func decode(from, to any) {
	if b, err := json.Marshal(from); err == nil {
		_ = json.Unmarshal(b, to)
	}
}

// Result is what the demo found.
type Result struct {
	Runs       int
	Executions int // rows seeded, both organizations
	Mismatches []string
	Settled    map[string]int
}

// Run runs the demo.
func Run(ctx context.Context, o Options) (Result, error) {
	o.Out = cmp.Or[io.Writer](o.Out, io.Discard)
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	o.Limit = cmp.Or(o.Limit, 50)
	o.LostGrace = cmp.Or(o.LostGrace, 3*time.Second)
	o.Pause = cmp.Or(o.Pause, 250*time.Millisecond)
	o.MaxRuns = cmp.Or(o.MaxRuns, 60)
	w := o.Out

	if os.Getenv(firestoreconn.EmulatorEnv) == "" {
		fmt.Fprintln(w, "starting the Firestore emulator (gcloud emulators firestore start) ...")
		emu, err := gcloudemu.Firestore(ctx)
		if err != nil {
			return Result{}, err
		}
		defer func() {
			_ = emu.Stop()
			fmt.Fprintln(w, "stopped the Firestore emulator")
		}()
		os.Setenv(firestoreconn.EmulatorEnv, emu.Host)
		defer os.Unsetenv(firestoreconn.EmulatorEnv)
		fmt.Fprintf(w, "Firestore emulator on %s\n", emu.Host)
	} else {
		fmt.Fprintf(w, "using the Firestore emulator at %s\n", os.Getenv(firestoreconn.EmulatorEnv))
	}
	fake, err := cloudrunfake.NewServer()
	if err != nil {
		return Result{}, err
	}
	defer fake.Close()
	fmt.Fprintf(w, "Cloud Run Executions fake on %s\n", fake.Addr)

	project := "stalesweep-demo-" + randomHex(4)
	fs, err := firestoreconn.Open(ctx, firestoreconn.Options{Project: project})
	if err != nil {
		return Result{}, err
	}
	defer fs.Close()

	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	orgA, orgB := uuid.NewString(), uuid.NewString()
	// The demo organization has sweeps enabled; the other has opted out, and nothing may touch
	// it whatever names it.
	for _, o := range []ledger.Organization{{UUID: orgA, SweepsEnabled: true}, {UUID: orgB, SweepsEnabled: false}} {
		if _, err := fs.Collection(ledger.OrganizationsCollection).Doc(o.UUID).Set(ctx, o); err != nil {
			return Result{}, fmt.Errorf("put organization %s: %w", o.UUID, err)
		}
	}
	rows, err := seed(ctx, fs, fake, orgA, orgB, time.Now())
	if err != nil {
		return Result{}, err
	}
	res := Result{Executions: len(rows), Settled: map[string]int{}}
	fmt.Fprintf(w, "seeded project %s: organization %s with %d runner executions, organization %s with %d\n\n",
		project, orgA, len(rows)-30, orgB, 30)

	var next round
	if o.Pipeline {
		var stop func()
		next, stop, err = pipelineRounds(ctx, o, fs, fake, project, orgA, orgB)
		if err != nil {
			return res, err
		}
		defer stop()
	} else {
		var stop func()
		if next, stop, err = inlineRounds(ctx, o, fake, project, orgA); err != nil {
			return res, err
		}
		defer stop()
	}
	mode := "inline syncs"
	if o.Pipeline {
		mode = "ticks → Dispatch → Sweep → SyncExecution over the Pub/Sub emulator"
	}
	fmt.Fprintf(w, "sweeping %s (%s; limit %d, min_age_seconds 60, lost grace %s)\n", contract.ExecutionSyncCloudRun, mode, o.Limit, o.LostGrace)
	fmt.Fprintf(w, "%4s  %10s  %7s  %7s  %9s  %7s  %7s  %6s\n", "run", "candidates", "started", "settled", "refreshed", "unknown", "skipped", "failed")
	for res.Runs < o.MaxRuns {
		r, err := next(ctx)
		if err != nil {
			return res, err
		}
		res.Runs++
		settled := 0
		for k, v := range r.settled {
			settled += v
			res.Settled[k] += v
		}
		fmt.Fprintf(w, "%4d  %10d  %7d  %7d  %9d  %7d  %7d  %6d\n", res.Runs, r.candidates, r.started, settled, r.refreshed, r.unknown, r.skipped, r.failed)
		if r.started == 0 {
			break // nothing stale is left that a sync could change
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(o.Pause):
		}
	}
	if res.Runs == o.MaxRuns {
		return res, fmt.Errorf("still finding stale rows after %d runs", o.MaxRuns)
	}

	res.Mismatches, err = verify(ctx, store, rows, w)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(w, "\n%d runs; settled %s; Cloud Run GetExecution calls: %d\n", res.Runs, formatCounts(res.Settled), fake.Calls(cloudrunfake.GetExecution))
	if len(res.Mismatches) > 0 {
		return res, fmt.Errorf("%d rows did not end as expected:\n  %s", len(res.Mismatches), strings.Join(res.Mismatches, "\n  "))
	}
	fmt.Fprintln(w, "every row ended as expected; nothing of the other organization was touched")
	return res, nil
}

// verify reads every seeded row back and checks it against its kind.
func verify(ctx context.Context, store *ledger.ExecutionStore, rows []seeded, w io.Writer) ([]string, error) {
	checks := map[string]Kind{}
	order := []string{}
	for _, k := range kinds() {
		checks[k.Name] = k
		order = append(order, k.Name)
	}
	checks[otherOrg] = Kind{Name: otherOrg, Expected: "untouched", check: untouched}
	order = append(order, otherOrg)
	ok, total := map[string]int{}, map[string]int{}
	var mismatches []string
	for _, s := range rows {
		final, err := store.Get(ctx, s.row.UUID)
		if err != nil {
			return nil, err
		}
		total[s.kind]++
		if checks[s.kind].check(s.row, final) {
			ok[s.kind]++
		} else {
			mismatches = append(mismatches, fmt.Sprintf("%s %s: status=%s outcome=%s active=%t", s.kind, s.row.UUID, final.Status, final.Outcome, final.Active))
		}
	}
	fmt.Fprintf(w, "\n%-40s %5s  %-36s %s\n", "rows", "count", "expected", "as expected")
	for _, name := range order {
		mark := "yes"
		if ok[name] != total[name] {
			mark = fmt.Sprintf("NO (%d of %d)", ok[name], total[name])
		}
		fmt.Fprintf(w, "%-40s %5d  %-36s %s\n", name, total[name], checks[name].Expected, mark)
	}
	return mismatches, nil
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	sum := 0
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
		sum += m[k]
	}
	return fmt.Sprintf("%d (%s)", sum, strings.Join(parts, ", "))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
