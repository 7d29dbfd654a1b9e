package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"github.com/stalesweep/stalesweep/emulator/localpipeline"
	_ "github.com/stalesweep/stalesweep/functions" // the targets the fan-out goes through
	"github.com/stalesweep/stalesweep/internal/app"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/fleet/orgadmin"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
	"github.com/stalesweep/stalesweep/internal/pipeline/rosterstore"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// measureFanout publishes one tick for many organizations into the Pub/Sub emulator, pushed to
// the functions served in this process, and times it until the last run record is completed;
// then times the emulator pushing as many raw messages to a handler that only acknowledges.
func measureFanout(ctx context.Context, e *env, p *progress, sz sizes, res *Result) error {
	n, stale := sz.fanoutScopes, sz.fanoutStale
	res.FanoutScopes, res.FanoutStale = n, stale
	fs, projectID, done, err := projectID(ctx, nil)
	if err != nil {
		return err
	}
	defer done()
	orgs := newIDs(n)
	if err := enable(ctx, fs, orgs); err != nil {
		return err
	}
	// One stale row in each of the first `stale` organizations (no provider reference: the run
	// reports it and completes); the rest of the fleet is quiet.
	old := time.Now().Add(-time.Hour)
	if err := bulk(ctx, fs, stale, func(i int) (*firestore.DocumentRef, any) {
		return fs.Collection(ledger.ExecutionsCollection).NewDoc(), ledger.Execution{OrganizationUUID: orgs[i],
			Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: old}
	}); err != nil {
		return err
	}
	if err := countTick(ctx, projectID, orgs, stale, res); err != nil {
		return err
	}
	p.say("one tick over %d organizations, %d with a stale row: %d invocations, %d Firestore operations, %d messages; a quiet organization: %.2f reads, %.2f writes, %.2f invocations",
		n, stale, res.TickInvocations, res.TickFirestoreOps, res.TickMessages, res.QuietScopeReads, res.QuietScopeWrites, res.QuietScopeInvocations)
	for k, v := range map[string]string{"GOOGLE_CLOUD_PROJECT": projectID, app.EnvCloudRunEndpoint: e.fake.Addr, app.EnvAuth: "off", app.EnvLogLevel: "error"} {
		os.Setenv(k, v)
	}
	os.Unsetenv("FUNCTION_TARGET")
	port, err := freePort()
	if err != nil {
		return err
	}
	// The framework prints a line per push; keep it off the bench's table.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		saved := os.Stdout
		os.Stdout = null
		defer func() { os.Stdout = saved; null.Close() }()
	}
	go func() { _ = funcframework.StartHostPort("127.0.0.1", strconv.Itoa(port)) }()
	ps, err := pubsub.NewClient(ctx, projectID)
	if err != nil {
		return err
	}
	defer ps.Close()
	if err := localpipeline.Create(ctx, ps, pipeline.Topics{}, "http://127.0.0.1:"+strconv.Itoa(port)); err != nil {
		return err
	}

	tick, _ := json.Marshal(map[string]any{"workflow_type": contract.ExecutionSyncCloudRun, "initial_data": map[string]any{}})
	pub := ps.Publisher(pipeline.TicksDefault)
	defer pub.Stop()
	completed := fs.Collection(ledger.RunsCollection).Where("status", "==", "completed")
	// tickThrough publishes a tick and waits until `want` run records in all are completed.
	tickThrough := func(want int) (time.Duration, error) {
		begin := time.Now()
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: tick, Attributes: map[string]string{message.AttrTrigger: "schedule"}}).Get(ctx); err != nil {
			return 0, err
		}
		err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
			r, err := completed.NewAggregationQuery().WithCount("n").Get(ctx)
			if err != nil {
				return false, err
			}
			c, _ := r["n"].(interface{ GetIntegerValue() int64 })
			return c != nil && c.GetIntegerValue() >= int64(want), nil
		})
		if err != nil {
			return 0, fmt.Errorf("wait for %d run records: %w", want, err)
		}
		return time.Since(begin), nil
	}
	// The first tick of a deployment builds the roster (it lists the organizations); the ones
	// after it, measured here, read it, as every tick does until it is ten minutes old.
	first, err := tickThrough(stale)
	if err != nil {
		return err
	}
	p.say("first tick (lists the organizations, builds the roster) → %d run records: %.0f ms", stale, float64(first.Milliseconds()))
	took, err := tickThrough(2 * stale)
	if err != nil {
		return err
	}
	res.FanoutMs = float64(took.Milliseconds())
	p.say("tick over %d organizations → Dispatch (roster, probes) → %d × Sweep → %d run records: %.0f ms", n, stale, stale, res.FanoutMs)

	raw, err := rawFanout(ctx, ps, projectID, stale)
	if err != nil {
		return err
	}
	res.RawFanoutMs = float64(raw.Milliseconds())
	res.FanoutRatio = res.RawFanoutMs / res.FanoutMs
	p.say("raw: %d messages published and pushed to a handler that only acknowledges: %.0f ms", stale, res.RawFanoutMs)
	hops, err := rawTwoHops(ctx, ps, projectID, stale)
	if err != nil {
		return err
	}
	res.RawTwoHopsMs = float64(hops.Milliseconds())
	res.FanoutFloorRatio = res.RawFanoutMs / res.RawTwoHopsMs
	res.FanoutRatioOverFloor = res.FanoutRatio / res.FanoutFloorRatio
	p.say("raw, two hops: one message pushed to a handler that publishes the %d, pushed to one that acknowledges: %.0f ms (fanout_ratio %.2f of the floor's %.2f: %.2f)",
		stale, res.RawTwoHopsMs, res.FanoutRatio, res.FanoutFloorRatio, res.FanoutRatioOverFloor)
	return measureTruth(ctx, e, p, sz, fs, ps, orgs[0], res)
}

// rawFanout publishes n messages to a topic pushed to a local handler that acknowledges, and
// times it until all n have arrived.
func rawFanout(ctx context.Context, ps *pubsub.Client, projectID string, n int) (time.Duration, error) {
	return rawHops(ctx, ps, projectID, "bench-raw", n, false)
}

// rawTwoHops is rawFanout behind one hop more, as a tick goes through Dispatch: one message
// pushed to a handler that publishes the n messages, pushed to a handler that acknowledges.
// Nothing is done at either hop; it is the floor of any fan-out through Pub/Sub here.
func rawTwoHops(ctx context.Context, ps *pubsub.Client, projectID string, n int) (time.Duration, error) {
	return rawHops(ctx, ps, projectID, "bench-hop", n, true)
}

// rawHops times n messages pushed to a handler that only acknowledges; with twoHops, published by
// a handler of one message pushed first.
func rawHops(ctx context.Context, ps *pubsub.Client, projectID, name string, n int, twoHops bool) (time.Duration, error) {
	var got atomic.Int64
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	pub := ps.Publisher(name)
	defer pub.Stop()
	publish := func(ctx context.Context) error {
		results := make([]*pubsub.PublishResult, n)
		for i := range n {
			results[i] = pub.Publish(ctx, &pubsub.Message{Data: []byte(`{"n": ` + strconv.Itoa(i) + `}`)})
		}
		for _, r := range results {
			if _, err := r.Get(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			if err := publish(r.Context()); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		} else {
			got.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	subscribe := func(topicID, path string) error {
		topic := fmt.Sprintf("projects/%s/topics/%s", projectID, topicID)
		if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			return err
		}
		_, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: fmt.Sprintf("projects/%s/subscriptions/%s", projectID, topicID), Topic: topic,
			PushConfig: &pubsubpb.PushConfig{PushEndpoint: "http://" + lis.Addr().String() + path}, AckDeadlineSeconds: 60,
		})
		return err
	}
	if err := subscribe(name, "/raw"); err != nil {
		return 0, err
	}
	begin := time.Now()
	if twoHops {
		if err := subscribe(name+"-first", "/first"); err != nil {
			return 0, err
		}
		first := ps.Publisher(name + "-first")
		defer first.Stop()
		begin = time.Now()
		if _, err := first.Publish(ctx, &pubsub.Message{Data: []byte(`{}`)}).Get(ctx); err != nil {
			return 0, err
		}
	} else if err := publish(ctx); err != nil {
		return 0, err
	}
	err = waitFor(ctx, 5*time.Minute, func() (bool, error) { return got.Load() >= int64(n), nil })
	return time.Since(begin), err
}

// waitFor polls cond until it holds: the emulator's pushes are asynchronous and offer nothing
// to block on.
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// countTick runs the Cloud Run sync's ticks over the fleet orgs, of which the first `stale` have
// work, for one roster period at its default schedule (every minute, RosterMaxAgeDefault apart:
// the first tick builds the roster, the rest read it) behind the gRPC spy, with probes,
// publishing into memory, and counts what they cost: billed Firestore reads (documents, at least
// one per query, and the clock's read each tick as production pays it), writes, messages, and
// the invocations a tick causes (itself and one Sweep per message). A quiet organization's share
// is the period's reads over the ticks and the organizations (an upper bound: the organizations
// with work are in it too); its writes are those of any document but the roster's, which are
// the fleet's, counted apart; its invocations are the sweeps published for it.
func countTick(ctx context.Context, projectID string, orgs []string, stale int, res *Result) error {
	spy := fsspy.New()
	fs, err := firestoreconn.Open(ctx, firestoreconn.Options{Project: projectID, DialOptions: spy.DialOptions()})
	if err != nil {
		return err
	}
	defer fs.Close()
	withWork := map[string]bool{}
	for _, org := range orgs[:stale] {
		withWork[org] = true
	}
	topics := &memoryTopics{msgs: map[string][]message.Outgoing{}}
	period := int(pipeline.RosterMaxAgeDefault / time.Minute)
	start := time.Now()
	var reads, writes, rosterWrites, quietSweeps int
	for i := range period {
		at := start.Add(time.Duration(i) * time.Minute)
		d, err := probingDispatcher(fs, topics, "sweeps", "", pipeline.DispatchConfig{}, ledgertest.LocalClock(func() time.Time { return at }))
		if err != nil {
			return err
		}
		spy.Reset()
		rep, err := d.Dispatch(ctx, pipeline.Tick{WorkflowType: contract.ExecutionSyncCloudRun, InitialData: json.RawMessage(`{}`), TickID: fmt.Sprint("bench-count-", i)})
		if err != nil {
			return err
		}
		if want := map[bool]string{true: "build", false: "read"}[i == 0]; rep.Published != stale || rep.Roster != want || (i == 0) != rep.RosterFinished {
			return fmt.Errorf("count a tick: tick %d published %d sweeps over %d organizations with a stale row, organizations by %q (want %q)", i, rep.Published, stale, rep.Roster, want)
		}
		for _, m := range topics.take("sweeps") {
			sweep, err := message.ParseStart(m.Data)
			if err != nil {
				return err
			}
			var in struct {
				OrganizationUUID string `json:"organization_uuid"`
			}
			_ = json.Unmarshal(sweep.InitialData, &in)
			if !withWork[in.OrganizationUUID] {
				quietSweeps++
			}
		}
		tickReads, tickWrites := spy.BilledReads()+1, 0 // +1: the clock's read
		for _, w := range spy.Writes() {
			if strings.Contains(w.Document, "/"+ledger.RosterCollection+"/") {
				rosterWrites++
			} else {
				tickWrites++
			}
		}
		reads, writes = reads+tickReads, writes+tickWrites
		switch i {
		case 0:
			res.TickRosterBuildFirestoreOps = tickReads + len(spy.Writes())
		case 1:
			res.TickFirestoreOps = tickReads + len(spy.Writes())
			res.TickMessages = rep.Published
			res.TickInvocations = 1 + rep.Published
		}
	}
	n := len(orgs)
	res.RosterPeriodTicks, res.RosterWritesPerPeriod = period, rosterWrites
	res.QuietScopeReads = float64(reads) / float64(period*n)
	if quiet := float64(n - stale); quiet > 0 {
		res.QuietScopeWrites = float64(writes) / (quiet * float64(period))
		res.QuietScopeInvocations = float64(quietSweeps) / (quiet * float64(period))
	}
	return nil
}

// probingDispatcher is a dispatcher of the Cloud Run sync over fs as production builds it
// (internal/app): probes on, the roster on (its default age), at the time clock gives,
// publishing sweeps to topic and continuations to ticksTopic ("": none).
func probingDispatcher(fs *firestore.Client, pub pipeline.Publisher, topic, ticksTopic string, cfg pipeline.DispatchConfig, clock firestoreconn.Clock) (*pipeline.Dispatcher, error) {
	wf, err := executionsync.New(ledger.NewExecutionStore(fs, ledger.TxConfig{}, ledger.Retention{}), nil, nil, executionsync.Config{Provider: ledger.ProviderCloudRun}, time.Now, nil)
	if err != nil {
		return nil, err
	}
	return pipeline.NewDispatcher(pipeline.DispatcherOptions{
		Orgs: orgadmin.New(fs), Publisher: pub, SweepsTopic: topic, Config: cfg, Log: slog.New(slog.DiscardHandler),
		Workflows:  workflow.NewEngine(workflow.Options{}, wf.Definition(executionsync.CloudRun)),
		Probe:      clock,
		Roster:     rosterstore.New(fs, ledger.Retention{}, nil),
		TicksTopic: ticksTopic,
	}), nil
}
