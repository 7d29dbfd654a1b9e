package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/message"
	"github.com/stalesweep/stalesweep/internal/pipeline"
)

// memoryTopics is a Publisher that keeps what is published, by topic: the fleet measurement
// feeds Dispatch's continuations back to it as the ticks topic would.
type memoryTopics struct {
	mu   sync.Mutex
	msgs map[string][]message.Outgoing
}

func (m *memoryTopics) PublishBatch(_ context.Context, topic string, msgs []message.Outgoing) []pipeline.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs[topic] = append(m.msgs[topic], msgs...)
	out := make([]pipeline.Result, len(msgs))
	for i := range out {
		out[i].ID = fmt.Sprintf("%s-%d", topic, len(m.msgs[topic])-len(msgs)+i)
	}
	return out
}

func (m *memoryTopics) take(topic string) []message.Outgoing {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.msgs[topic]
	m.msgs[topic] = nil
	return out
}

// measureFleet writes a fleet of organizations (100,000; quick: 2,000), a few of them with a
// stale row, and dispatches one Cloud Run sync tick over it with probes and continuations, as
// production does, feeding each continuation back to Dispatch until none is left. Every
// organization with a stale row must get its sweep within that one tick. The listing reads one
// invocation's share in one page: the emulator evaluates every query over the whole collection,
// so 500-organization pages over 100,000 would measure the emulator, not the dispatch.
func measureFleet(ctx context.Context, p *progress, sz sizes, res *Result) error {
	n, stale := sz.fleetOrgs, sz.fleetStale
	fs, done, err := project(ctx, nil)
	if err != nil {
		return err
	}
	defer done()
	orgs := newIDs(n)
	began := time.Now()
	if err := enable(ctx, fs, orgs); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	withWork := map[string]bool{}
	for len(withWork) < stale {
		withWork[orgs[rng.IntN(n)]] = true
	}
	var picked []string
	for org := range withWork {
		picked = append(picked, org)
	}
	old := time.Now().Add(-time.Hour)
	if err := bulk(ctx, fs, len(picked), func(i int) (*firestore.DocumentRef, any) {
		return fs.Collection(ledger.ExecutionsCollection).NewDoc(), ledger.Execution{OrganizationUUID: picked[i],
			Provider: ledger.ProviderCloudRun, Status: ledger.StatusRunning, Active: true, ObservedAt: old}
	}); err != nil {
		return err
	}
	p.say("fleet: %d organizations written, %d with a stale row, in %s", n, stale, time.Since(began).Round(time.Millisecond))

	topics := &memoryTopics{msgs: map[string][]message.Outgoing{}}
	d, err := probingDispatcher(fs, topics, "sweeps", "ticks", pipeline.DispatchConfig{PageSize: min(sz.fleetShard, 5000), ShardScopes: sz.fleetShard, Budget: 5 * time.Minute},
		firestoreconn.ServerClock(fs))
	if err != nil {
		return err
	}

	// The first tick finds no roster: it lists the fleet and builds one. The next reads it, as
	// every tick does until the roster is RosterMaxAgeDefault old. Each must reach every
	// organization with a stale row.
	build, err := fleetTick(ctx, d, topics, "fleet-build", n, withWork)
	if err != nil {
		return err
	}
	p.say("first tick (lists the fleet, builds the roster): %s", build)
	read, err := fleetTick(ctx, d, topics, "fleet-tick", n, withWork)
	if err != nil {
		return err
	}
	p.say("next tick (reads the roster): %s", read)
	res.FleetOrgs, res.FleetStale, res.FleetInvocations = n, stale, read.invocations
	res.FleetTickMs, res.FleetBuildTickMs, res.FleetBuildInvocations = float64(read.elapsed.Milliseconds()), float64(build.elapsed.Milliseconds()), build.invocations
	res.FleetScopesReached = build.ok() && read.ok() && build.mode == "build" && read.mode == "read"
	if !res.FleetScopesReached {
		return fmt.Errorf("fleet: not every stale organization was reached: first tick %s; next tick %s", build, read)
	}
	return nil
}

// fleetRun is what one tick over the fleet did.
type fleetRun struct {
	n, stale, invocations, scopes, sweeps, reached int
	mode                                           string // where the first invocation took the organizations from
	elapsed                                        time.Duration
}

func (r fleetRun) ok() bool { return r.reached == r.stale && r.sweeps == r.stale && r.scopes == r.n }

func (r fleetRun) String() string {
	return fmt.Sprintf("organizations by %s, %d Dispatch invocations, %d scopes enumerated, %d sweeps published, %d of %d stale organizations reached, in %.0f ms",
		r.mode, r.invocations, r.scopes, r.sweeps, r.reached, r.stale, float64(r.elapsed.Milliseconds()))
}

// fleetTick dispatches one tick, feeding each continuation back to Dispatch until none is left,
// and counts the organizations with work it reached.
func fleetTick(ctx context.Context, d *pipeline.Dispatcher, topics *memoryTopics, id string, n int, withWork map[string]bool) (fleetRun, error) {
	run := fleetRun{n: n, stale: len(withWork)}
	tick := pipeline.Tick{WorkflowType: contract.ExecutionSyncCloudRun, InitialData: []byte(`{}`), Trigger: "schedule", TickID: id}
	began := time.Now()
	for {
		rep, err := d.Dispatch(ctx, tick)
		if err != nil {
			return run, fmt.Errorf("fleet dispatch %d of %s: %w", run.invocations, id, err)
		}
		if run.invocations == 0 {
			run.mode = rep.Roster
		}
		run.invocations++
		run.scopes += rep.Scopes
		conts := topics.take("ticks")
		if len(conts) == 0 {
			break
		}
		if len(conts) != 1 || run.invocations > n {
			return run, fmt.Errorf("fleet dispatch %d of %s: %d continuations", run.invocations, id, len(conts))
		}
		resume, err := message.Continuation(conts[0].Attributes, "")
		if err != nil {
			return run, err
		}
		tick.TickID, tick.After, tick.Roster = resume.TickID, resume.After, resume.Roster
	}
	run.elapsed = time.Since(began)
	sweeps := topics.take("sweeps")
	run.sweeps = len(sweeps)
	seen := map[string]bool{}
	for _, m := range sweeps {
		seen[m.Attributes[message.AttrWorkflowRunUUID]] = true
	}
	for org := range withWork {
		if seen[pipeline.RunUUID(id, contract.ExecutionSyncCloudRun, org)] {
			run.reached++
		}
	}
	return run, nil
}
