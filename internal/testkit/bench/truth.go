package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/run/apiv2/runpb"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/logentrytest"
)

// Truth is one path's time to truth: from the moment the Cloud Run fake reports an execution
// finished to the moment a read of its row finds it settled, over Samples executions.
type Truth struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

// TimeToTruth is time_to_truth_ms: the event path (the execution's end entry published to the
// ends topic, pushed to ObserveExecution) beside the sweep path (ticks at the schedule, each
// pushed to Dispatch, Sweep and the syncs).
type TimeToTruth struct {
	Event Truth `json:"event"`
	Sweep Truth `json:"sweep"`
	// The sweep's schedule and min_age_seconds (the defaults, 60; quick: 10, so that the quick
	// bench finishes): a row is looked at by the first tick after it is that old.
	SweepScheduleS int `json:"sweep_schedule_s"`
}

// EventCost is what one entry costs ObserveExecution, counted on the wire: an entry whose
// execution ended and whose row settles, and an entry that names no row.
type EventCost struct {
	Queries       float64 `json:"queries"`
	BilledReads   float64 `json:"billed_reads"`
	Writes        float64 `json:"writes"`
	Commits       float64 `json:"commits"`
	ExecutorCalls float64 `json:"executor_calls"`
}

// truthPoll is how often the measurements read the rows they wait for: the figures carry up to
// this much (and a read's own time) more than the path took.
const truthPoll = 20 * time.Millisecond

// measureTruth times rows of org from their executions' end to their settlement, through the
// functions served in this process (measureFanout's): by the event path, then by the sweep path
// at the schedule; then counts what an entry costs the event path. ps publishes to the
// emulator's topics, projectID's, which localpipeline created.
func measureTruth(ctx context.Context, e *env, p *progress, sz sizes, fs *firestore.Client, ps *pubsub.Client, org string, res *Result) error {
	ends := ps.Publisher(pipeline.EndsDefault)
	defer ends.Stop()
	event, err := eventTruth(ctx, e, fs, ends, org, sz.truthEvents)
	if err != nil {
		return fmt.Errorf("event path: %w", err)
	}
	res.TimeToTruthMs.Event = event
	p.say("event path: %d executions ending %s apart, each entry published to the ends topic: p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		event.Samples, truthEventSpacing, event.P50, event.P99, event.Max)

	period := time.Duration(sz.truthScheduleS) * time.Second
	res.TimeToTruthMs.SweepScheduleS = sz.truthScheduleS
	ticks := ps.Publisher(pipeline.TicksDefault)
	defer ticks.Stop()
	sweep, err := sweepTruth(ctx, e, fs, ticks, org, sz.truthSweepRows, period)
	if err != nil {
		return fmt.Errorf("sweep path: %w", err)
	}
	res.TimeToTruthMs.Sweep = sweep
	p.say("sweep path: %d executions ending across a %s schedule, ticks on it (min_age_seconds %d): p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		sweep.Samples, period, sz.truthScheduleS, sweep.P50, sweep.P99, sweep.Max)

	settles, noRow, err := eventCost(ctx, e, fs, org)
	if err != nil {
		return fmt.Errorf("event cost: %w", err)
	}
	res.EventCostSettled, res.EventCostNoRow = settles, noRow
	p.say("per entry that settles: %.0f queries, %.0f billed reads, %.0f writes in %.0f commits, %.0f GetExecution; per entry naming no row: %.0f billed reads, %.0f writes, %.0f GetExecution",
		settles.Queries, settles.BilledReads, settles.Writes, settles.Commits, settles.ExecutorCalls, noRow.BilledReads, noRow.Writes, noRow.ExecutorCalls)
	return nil
}

// truthEventSpacing is how far apart the event path's executions end: a few are in flight at once.
const truthEventSpacing = 100 * time.Millisecond

// truthRow creates a running row of org observed at, whose execution the fake reports as exec
// builds it, and returns its ref and the execution's name.
func truthRow(ctx context.Context, e *env, fs *firestore.Client, org string, at time.Time, exec func(string, time.Time) *runpb.Execution) (*firestore.DocumentRef, string, error) {
	ref := fs.Collection(ledger.ExecutionsCollection).NewDoc()
	name := cloudrunfake.ExecutionName("bench", "europe-west1", "job", ref.ID)
	if err := e.fake.SetExecution(exec(name, at)); err != nil {
		return nil, "", err
	}
	_, err := ref.Create(ctx, ledger.Execution{OrganizationUUID: org, Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true,
		ObservedAt: at, ProviderRef: map[string]any{"execution": name}})
	return ref, name, err
}

// pending is a row waiting to be found settled: since when its execution has ended (zero: not
// yet), and, once found, how long after that.
type pending struct {
	ref   *firestore.DocumentRef
	name  string
	ended time.Time
	took  time.Duration
	done  bool
}

// pollSettled reads the rows that have ended and are not yet found settled, once; it records
// each newly settled row's time and fails on one settled by the other path than event says.
func pollSettled(ctx context.Context, fs *firestore.Client, rows []*pending, event bool) (left int, err error) {
	var refs []*firestore.DocumentRef
	var waiting []*pending
	for _, r := range rows {
		if !r.done {
			left++
			if !r.ended.IsZero() {
				refs, waiting = append(refs, r.ref), append(waiting, r)
			}
		}
	}
	if len(refs) == 0 {
		return left, nil
	}
	snaps, err := fs.GetAll(ctx, refs)
	if err != nil {
		return left, err
	}
	seen := time.Now()
	for i, s := range snaps {
		var row ledger.Execution
		if err := s.DataTo(&row); err != nil {
			return left, fmt.Errorf("row %s: %w", s.Ref.ID, err)
		}
		if row.Active {
			continue
		}
		if byEvent := row.Settlement.Evidence[executionsync.EvidencePath] == "event"; byEvent != event || row.Outcome != ledger.OutcomeSucceeded {
			return left, fmt.Errorf("row %s settled %s with evidence %v, not by the %s path", s.Ref.ID, row.Outcome, row.Settlement.Evidence,
				map[bool]string{true: "event", false: "sweep"}[event])
		}
		waiting[i].done, waiting[i].took = true, seen.Sub(waiting[i].ended)
		left--
	}
	return left, nil
}

// eventTruth ends n executions truthEventSpacing apart, each in the fake then with its end entry
// published to the ends topic as the log sink does, and reads the rows every truthPoll until each
// is settled.
func eventTruth(ctx context.Context, e *env, fs *firestore.Client, ends *pubsub.Publisher, org string, n int) (Truth, error) {
	rows := make([]*pending, n)
	for i := range rows {
		ref, name, err := truthRow(ctx, e, fs, org, time.Now(), cloudrunfake.Running)
		if err != nil {
			return Truth{}, err
		}
		rows[i] = &pending{ref: ref, name: name}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	poll := time.NewTicker(truthPoll)
	defer poll.Stop()
	var published []*pubsub.PublishResult
	next, nextAt := 0, time.Now()
	for {
		for next < n && !time.Now().Before(nextAt) {
			r := rows[next]
			r.ended = time.Now()
			if err := e.fake.SetExecution(cloudrunfake.Succeeded(r.name, r.ended)); err != nil {
				return Truth{}, err
			}
			published = append(published, ends.Publish(ctx, &pubsub.Message{Data: logentrytest.CloudRunEnd(r.name, "bench-"+r.ref.ID, "", r.ended)}))
			next, nextAt = next+1, nextAt.Add(truthEventSpacing)
		}
		left, err := pollSettled(ctx, fs, rows, true)
		if err != nil {
			return Truth{}, err
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return Truth{}, fmt.Errorf("%d of %d rows not settled by their end entries: %w", left, n, ctx.Err())
		case <-poll.C:
		}
	}
	for _, r := range published {
		if _, err := r.Get(ctx); err != nil {
			return Truth{}, err
		}
	}
	return truthOf(rows), nil
}

// sweepTruth ends n executions spread over one period, as a dead runner's would (the row last
// observed as its execution ended), and publishes a tick at every multiple of period on the wall
// clock, as Cloud Scheduler does, with min_age_seconds period, until every row is settled.
func sweepTruth(ctx context.Context, e *env, fs *firestore.Client, ticks *pubsub.Publisher, org string, n int, period time.Duration) (Truth, error) {
	input := map[string]any{}
	if period != time.Duration(executionsync.MinAgeSecondsDefault)*time.Second {
		input["min_age_seconds"] = int(period / time.Second)
	}
	tick, _ := json.Marshal(map[string]any{"workflow_type": contract.ExecutionSyncCloudRun, "initial_data": input})
	ctx, cancel := context.WithTimeout(ctx, 4*period+2*time.Minute)
	defer cancel()
	begin := time.Now()
	rows := make([]*pending, n)
	ends := make([]time.Time, n) // when each row's runner dies: spread over the period
	for i := range ends {
		ends[i] = begin.Add(time.Duration(i) * period / time.Duration(n))
	}
	nextTick := begin.Truncate(period).Add(period)
	poll := time.NewTicker(5 * truthPoll)
	defer poll.Stop()
	created := 0
	for {
		now := time.Now()
		for created < n && !now.Before(ends[created]) {
			ref, name, err := truthRow(ctx, e, fs, org, now, cloudrunfake.Succeeded)
			if err != nil {
				return Truth{}, err
			}
			rows[created] = &pending{ref: ref, name: name, ended: now}
			created++
		}
		if !now.Before(nextTick) {
			if _, err := ticks.Publish(ctx, &pubsub.Message{Data: tick, Attributes: map[string]string{message.AttrTrigger: "schedule"}}).Get(ctx); err != nil {
				return Truth{}, err
			}
			nextTick = nextTick.Add(period)
		}
		if created == n {
			left, err := pollSettled(ctx, fs, rows, false)
			if err != nil {
				return Truth{}, err
			}
			if left == 0 {
				return truthOf(rows), nil
			}
		}
		select {
		case <-ctx.Done():
			return Truth{}, fmt.Errorf("rows not settled by the sweep: %w", ctx.Err())
		case <-poll.C:
		}
	}
}

// truthOf is the rows' times: p50 and p99 by nearest rank, and the slowest.
func truthOf(rows []*pending) Truth {
	ms := make([]float64, len(rows))
	for i, r := range rows {
		ms[i] = float64(r.took.Microseconds()) / 1000
	}
	slices.Sort(ms)
	rank := func(q float64) float64 { return ms[max(int(math.Ceil(q*float64(len(ms))))-1, 0)] }
	return Truth{Samples: len(ms), P50: rank(0.50), P99: rank(0.99), Max: ms[len(ms)-1]}
}

// truthCostEntries is how many entries of each kind eventCost averages over.
const truthCostEntries = 5

// eventCost counts, on the wire, what ObserveExecution's observer costs per entry, built by
// app.New as the function builds it (from this process's environment, measureFanout's) with the
// spy on its Firestore connection: for entries whose executions ended and whose rows settle, and
// for entries naming executions no row references.
func eventCost(ctx context.Context, e *env, fs *firestore.Client, org string) (settles, noRow EventCost, err error) {
	cfg, err := app.ConfigFromEnv(os.Getenv)
	if err != nil {
		return settles, noRow, err
	}
	spy := fsspy.New()
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler), time.Now, app.Parts{FirestoreDialOptions: spy.DialOptions()})
	if err != nil {
		return settles, noRow, err
	}
	defer a.Close()
	count := func(entry func(i int) ([]byte, error), check func(executionsync.Observation) error) (EventCost, error) {
		var c EventCost
		for i := range truthCostEntries {
			data, err := entry(i)
			if err != nil {
				return c, err
			}
			spy.Reset()
			calls := e.fake.Calls(cloudrunfake.GetExecution)
			obs, err := a.Observer.Observe(ctx, data, time.Now(), nil)
			if err != nil {
				return c, err
			}
			if err := check(obs); err != nil {
				return c, err
			}
			queries := 0
			for _, q := range spy.Queries() {
				if fsspy.Shape(q).Collection == ledger.ExecutionsCollection {
					queries++
				}
			}
			c.Queries += float64(queries)
			c.BilledReads += float64(spy.BilledReads())
			c.Writes += float64(len(spy.Writes()))
			c.Commits += float64(spy.Commits())
			c.ExecutorCalls += float64(e.fake.Calls(cloudrunfake.GetExecution) - calls)
		}
		for _, f := range []*float64{&c.Queries, &c.BilledReads, &c.Writes, &c.Commits, &c.ExecutorCalls} {
			*f /= truthCostEntries
		}
		return c, nil
	}
	settles, err = count(func(int) ([]byte, error) {
		at := time.Now()
		ref, name, err := truthRow(ctx, e, fs, org, at, cloudrunfake.Succeeded)
		if err != nil {
			return nil, err
		}
		return logentrytest.CloudRunEnd(name, "bench-cost-"+ref.ID, "", at), nil
	}, func(obs executionsync.Observation) error {
		if len(obs.Results) != 1 || obs.Results[0].Outcome != executionsync.SyncSettled {
			return fmt.Errorf("an ended execution's entry came to %+v, want one row settled", obs)
		}
		return nil
	})
	if err != nil {
		return settles, noRow, err
	}
	noRow, err = count(func(i int) ([]byte, error) {
		name := cloudrunfake.ExecutionName("bench", "europe-west1", "job", fmt.Sprint("no-row-", i))
		return logentrytest.CloudRunEnd(name, fmt.Sprint("bench-no-row-", i), "", time.Now()), nil
	}, func(obs executionsync.Observation) error {
		if len(obs.Results) != 0 || obs.Ignored != "no_row" {
			return fmt.Errorf("an entry naming no row came to %+v, want it ignored for no row", obs)
		}
		return nil
	})
	return settles, noRow, err
}
