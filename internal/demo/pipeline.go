package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/emulator/localpipeline"
	_ "github.com/stalesweep/stalesweep/functions" // registers the targets served below
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// pubsubEmulatorEnv is the variable the Pub/Sub client follows to the emulator.
const pubsubEmulatorEnv = "PUBSUB_EMULATOR_HOST"

// pipelineRounds starts the Pub/Sub emulator (unless PUBSUB_EMULATOR_HOST names one) and the
// functions on a free loopback port, lays the topics and push subscriptions, enables sweeps for
// orgA only, and returns a round that publishes one tick and waits for its run on orgA and every
// sync of it. The functions server lives until the process ends.
func pipelineRounds(ctx context.Context, o Options, fs *firestore.Client, fake *cloudrunfake.Server, project, orgA, orgB string) (round, func(), error) {
	var stops []func()
	cleanup := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) (round, func(), error) { cleanup(); return nil, nil, err }
	w := o.Out
	if os.Getenv(pubsubEmulatorEnv) == "" {
		fmt.Fprintln(w, "starting the Pub/Sub emulator (gcloud beta emulators pubsub start) ...")
		emu, err := gcloudemu.PubSub(ctx, project)
		if err != nil {
			return fail(err)
		}
		stops = append(stops, func() {
			_ = emu.Stop()
			fmt.Fprintln(w, "stopped the Pub/Sub emulator")
		})
		os.Setenv(pubsubEmulatorEnv, emu.Host)
		stops = append(stops, func() { os.Unsetenv(pubsubEmulatorEnv) })
		fmt.Fprintf(w, "Pub/Sub emulator on %s\n", emu.Host)
	}
	// The functions build their dependencies from the environment, as on the platform.
	for k, v := range map[string]string{
		"GOOGLE_CLOUD_PROJECT":  project,
		app.EnvCloudRunEndpoint: fake.Addr,
		app.EnvLostGrace:        o.LostGrace.String(),
		app.EnvAuth:             "off",
		app.EnvLogLevel:         "warn",
	} {
		os.Setenv(k, v)
	}
	os.Unsetenv("FUNCTION_TARGET")
	if !o.Verbose {
		// The functions framework prints to the process's stdout on every push; keep the
		// demo's table readable. (The demo writes to o.Out, which still points at the terminal.)
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			saved := os.Stdout
			os.Stdout = null
			stops = append(stops, func() { os.Stdout = saved; null.Close() })
		}
	}
	port, err := gcloudemu.FreePort()
	if err != nil {
		return fail(err)
	}
	go func() { _ = funcframework.StartHostPort("127.0.0.1", strconv.Itoa(port)) }()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	fmt.Fprintf(w, "functions (Dispatch, Sweep, SyncExecution, StartWorkflow) on %s\n", url)

	ps, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { ps.Close() })
	if err := localpipeline.Create(ctx, ps, pipeline.Topics{}, url); err != nil {
		return fail(err)
	}
	pub := ps.Publisher(pipeline.TicksDefault)
	stops = append(stops, pub.Stop)
	runs := runstore.New(fs)
	tick, _ := json.Marshal(map[string]any{"workflow_type": contract.ExecutionSyncCloudRun, "initial_data": map[string]any{"limit": o.Limit}})

	return func(ctx context.Context) (roundResult, error) {
		id, err := pub.Publish(ctx, &pubsub.Message{Data: tick, Attributes: map[string]string{message.AttrTrigger: "schedule", message.AttrActor: "demo"}}).Get(ctx)
		if err != nil {
			return roundResult{}, fmt.Errorf("publish tick: %w", err)
		}
		run := pipeline.RunUUID(id, contract.ExecutionSyncCloudRun, orgA)
		var rec runstore.RunRecord
		if err := poll(ctx, func() bool {
			rec, err = runs.GetRun(ctx, run)
			return err == nil && (rec.Status == workflow.StateCompleted || rec.Status == workflow.StateFailed)
		}); err != nil {
			return roundResult{}, fmt.Errorf("wait for run %s of tick %s: %w", run, id, err)
		}
		if rec.Status == workflow.StateFailed {
			return roundResult{}, fmt.Errorf("run %s failed: %+v", run, rec.Failure)
		}
		r := roundResult{settled: map[string]int{}}
		r.candidates = asInt(rec.Output["candidate_count"])
		r.started = asInt(rec.Output["started_count"])
		r.skipped = asInt(rec.Output["skipped_missing_metadata_count"])
		r.failed = asInt(rec.Output["failed_start_count"])
		var counts map[string]int
		if err := poll(ctx, func() bool {
			_, counts, err = runs.SyncReceipts(ctx, run, 1000)
			n := 0
			for _, c := range counts {
				n += c
			}
			return err == nil && n >= r.started
		}); err != nil {
			return roundResult{}, fmt.Errorf("wait for the syncs of run %s: %w", run, err)
		}
		for k, n := range counts {
			switch kind, outcome, _ := strings.Cut(k, ":"); kind {
			case string(ledger.ChangeSettle):
				r.settled[outcome] += n
			case string(ledger.ChangeRefresh):
				r.refreshed += n
			case string(ledger.ChangeUnknown):
				r.unknown += n
			}
		}
		return r, nil
	}, cleanup, nil
}

// poll checks cond every 100 ms for up to a minute: the pipeline's deliveries are asynchronous
// and offer nothing to block on.
func poll(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func asInt(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}
