package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// benchClock is a clock the blind-target measurement moves by hand, so that its ticks can be
// minutes apart without waiting for them.
type benchClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *benchClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *benchClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// blindTicks are the writes to runner_executions of the ticks of a target gone blind.
type blindTicks struct {
	rows                                int
	first, second, firstHeld, afterHeld int
}

// measureBlind counts the writes ticks make to the rows of a Cloud Run target that knows none
// of its executions, through the execution-sync workflow as the app builds it (guard on): the
// tick that first finds them unknown, the tick a minute later (nothing learned: it should write
// nothing), the first tick past the lost grace (the guard holds them, and each is written once,
// its keep-alive), and the tick a minute after that.
func measureBlind(ctx context.Context, e *env, p *progress, res *Result) error {
	const n = executionsync.LimitMax // one run's worth, one organization
	spy := fsspy.New()
	fs, done, err := project(ctx, spy)
	if err != nil {
		return err
	}
	defer done()
	clock := &benchClock{t: time.Now().UTC().Truncate(time.Microsecond)}
	org := uuid.NewString()
	if err := ledger.NewOrganizationStore(fs).Put(ctx, ledger.Organization{UUID: org, SweepsEnabled: true}); err != nil {
		return err
	}
	old := clock.now().Add(-10 * time.Minute)
	err = bulk(ctx, fs, n, func(int) (*firestore.DocumentRef, any) {
		id := uuid.NewString()
		// An execution the fake never heard of: NotFound, as from a target looking elsewhere.
		ref := map[string]any{"execution": cloudrunfake.ExecutionName("blind", "europe-west1", "job", id)}
		return fs.Collection(ledger.ExecutionsCollection).Doc(id), ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun,
			ProviderRef: ref, Status: ledger.StatusRunning, Active: true, ObservedAt: old}
	})
	if err != nil {
		return err
	}
	store := ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{})
	adapter := cloudrun.New(e.run, cloudrun.Config{})
	cfg := executionsync.Config{Provider: ledger.ProviderCloudRun, Budget: 10 * time.Minute}.WithDefaults()
	syncer := executionsync.NewSyncer(executionsync.SyncerConfig{Store: store, Executor: adapter, Kind: executionsync.CloudRun, Now: clock.now, LostGrace: cfg.LostGrace,
		Guard: blindguard.New(targetstore.New(fs, ledger.Retention{}), blindguard.Config{}, logging.Discard())})
	wf, err := executionsync.New(store, adapter, &executionsync.Inline{Syncer: syncer, Concurrency: cfg.Concurrency}, cfg, clock.now, nil)
	if err != nil {
		return err
	}
	engine := workflow.NewEngine(workflow.Options{Runs: runstore.New(fs), Now: clock.now, Log: logging.Discard()}, wf.Definition(executionsync.CloudRun))
	input, _ := json.Marshal(map[string]any{"organization_uuid": org, "limit": n})
	tick := func() (int, error) {
		spy.Reset()
		out, err := engine.Start(ctx, workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: input, Trigger: workflow.TriggerLocal})
		if err != nil {
			return 0, err
		}
		var st executionsync.Stats
		b, _ := json.Marshal(out.Stats)
		_ = json.Unmarshal(b, &st)
		if out.Status != workflow.StateCompleted || st.Unknown != n || len(st.Settled) != 0 {
			return 0, fmt.Errorf("run %s ended %s (%v): %d unknown, settled %v; want all %d unknown, none settled", out.RunUUID, out.Status, out.Err, st.Unknown, st.Settled, n)
		}
		writes := 0
		for _, w := range spy.Writes() {
			if strings.Contains(w.Document, "/"+ledger.ExecutionsCollection+"/") {
				writes++
			}
		}
		return writes, nil
	}
	b := blindTicks{rows: n}
	for _, step := range []struct {
		after time.Duration
		into  *int
	}{
		{0, &b.first}, {time.Minute, &b.second}, {cfg.LostGrace, &b.firstHeld}, {time.Minute, &b.afterHeld},
	} {
		clock.advance(step.after)
		if *step.into, err = tick(); err != nil {
			return err
		}
	}
	res.BlindRows, res.BlindWritesFirstTick, res.BlindWritesPerTick = b.rows, b.first, b.second
	res.BlindWritesKeepAliveTick, res.BlindWritesAfterKeepAlive = b.firstHeld, b.afterHeld
	p.say("%d rows of a blind target: %d row writes the first tick, %d the next; past the grace (held) %d, then %d",
		n, b.first, b.second, b.firstHeld, b.afterHeld)
	return nil
}
