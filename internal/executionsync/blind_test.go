package executionsync_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/logsink"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
)

// lines is a log sink tests read back; the workflow writes to it from several goroutines.
type lines struct{ logsink.Sink }

// count returns how many lines at severity say message (a prefix) about target.
func (l *lines) count(t *testing.T, severity, message, target string) int {
	t.Helper()
	n := 0
	for _, m := range l.Lines(t) {
		if m["severity"] == severity && m["target"] == target && strings.HasPrefix(m["message"].(string), message) {
			n++
		}
	}
	return n
}

// blindFleet is a fleet of organizations whose rows run on two Cloud Run targets.
type blindFleet struct {
	e    *env
	orgs []string
	rows map[string][]string // by target
}

const (
	targetA = "cloud_run:projects/blind/locations/europe-west1"
	targetB = "cloud_run:projects/seeing/locations/europe-west1"
)

// blindRows seeds n rows of each organization on targetA, the target that goes blind.
func (f *blindFleet) blindRows(n int) {
	f.e.t.Helper()
	for _, org := range f.orgs {
		for range n {
			f.row(org, targetA, "blind")
		}
	}
}

// seeingRows seeds n rows on targetB, the organizations' in turn.
func (f *blindFleet) seeingRows(n int) {
	f.e.t.Helper()
	for i := range n {
		f.row(f.orgs[i%len(f.orgs)], targetB, "seeing")
	}
}

// row seeds a running row of org on the target's project, its execution running at Cloud Run.
func (f *blindFleet) row(org, target, project string) {
	f.e.t.Helper()
	id := uuid.NewString()
	name := cloudrunfake.ExecutionName(project, "europe-west1", "job", "e-"+id[:12])
	if err := f.e.fake.SetExecution(cloudrunfake.Running(name, f.e.clock.Now().Add(-time.Hour))); err != nil {
		f.e.t.Fatal(err)
	}
	if err := (ledgertest.Executions{Client: f.e.fs}).Put(context.Background(), ledger.Execution{UUID: id, OrganizationUUID: org, Provider: ledger.ProviderCloudRun,
		ProviderRef: map[string]any{"execution": name}, Status: ledger.StatusRunning, Active: true, ObservedAt: f.e.clock.Now().Add(-10 * time.Minute)}); err != nil {
		f.e.t.Fatal(err)
	}
	f.rows[target] = append(f.rows[target], id)
}

// forget makes Cloud Run forget the executions of rows.
func (f *blindFleet) forget(rows ...string) {
	for _, id := range rows {
		f.e.fake.RemoveExecution(f.e.get(id).ProviderRef["execution"].(string))
	}
}

// sweep runs the workflow on every organization, concurrently when concurrent, and returns the
// runs' stats.
func (f *blindFleet) sweep(concurrent bool) []executionsync.Stats {
	f.e.t.Helper()
	out := make([]executionsync.Stats, len(f.orgs))
	var wg sync.WaitGroup
	for i, org := range f.orgs {
		run := func() {
			defer wg.Done()
			raw, _ := json.Marshal(map[string]any{"organization_uuid": org, "limit": 200})
			o, err := f.e.engine.Start(context.Background(), workflow.Request{Type: contract.ExecutionSyncCloudRun, InitialData: raw, Trigger: workflow.TriggerSchedule})
			if err != nil || o.Status != workflow.StateCompleted {
				f.e.t.Errorf("run of %s: %v %v", org, err, o.Err)
				return
			}
			testenv.Decode(f.e.t, o.Stats, &out[i])
		}
		wg.Add(1)
		if concurrent {
			go run()
		} else {
			run()
		}
	}
	wg.Wait()
	return out
}

func (f *blindFleet) lost(target string) int {
	n := 0
	for _, id := range f.rows[target] {
		if r := f.e.get(id); r.Outcome == ledger.OutcomeLost {
			n++
		}
	}
	return n
}

func newBlindFleet(t *testing.T, orgs int, logs *lines) *blindFleet {
	e := newEnv(t, options{cfg: executionsync.Config{LostGrace: 15 * time.Minute}, guard: &blindguard.Config{}, logs: logs})
	f := &blindFleet{e: e, rows: map[string][]string{}}
	for range orgs {
		f.orgs = append(f.orgs, uuid.NewString())
	}
	testenv.Enable(t, e.fs, f.orgs...)
	return f
}

// A Cloud Run target that forgets every execution it runs — a wrong project in the writers'
// references, a regional incident — settles none of its rows lost, in any organization, until an
// operator clears it; another target's genuinely aged-out executions are settled lost as usual.
func TestABlindCloudRunTargetSettlesNothingLostUntilAnOperatorClearsIt(t *testing.T) {
	t.Parallel()
	logs := &lines{}
	f := newBlindFleet(t, 5, logs)
	f.blindRows(6)
	f.seeingRows(33) // the control: 30 it knows, 3 aged out
	f.sweep(false)   // every row refreshed: Cloud Run knows them all
	f.forget(f.rows[targetA]...)
	f.forget(f.rows[targetB][:3]...)

	f.e.clock.Advance(10 * time.Minute)
	f.sweep(false) // the forgotten ones become unknown
	f.e.clock.Advance(20 * time.Minute)
	stats := f.sweep(false) // past the grace
	if n := f.lost(targetA); n != 0 {
		t.Errorf("%d rows of the blind target were settled lost, want 0", n)
	}
	if n := f.lost(targetB); n != 3 {
		t.Errorf("%d aged-out rows of the seeing target were settled lost, want 3", n)
	}
	held := 0
	for _, s := range stats {
		held += s.Blind[targetA]
		if s.Blind[targetA] != 6 {
			t.Errorf("a run held %d rows of the blind target, want its 6: %+v", s.Blind[targetA], s.Blind)
		}
	}
	if n := logs.count(t, "ERROR", "blind executor: rows of this target", targetA); n != len(f.orgs) {
		t.Errorf("%d run ERROR lines name the blind target, want one per run (%d)", n, len(f.orgs))
	}
	tgt, found, err := targetstore.New(f.e.fs, ledger.Retention{}).Get(context.Background(), targetA)
	if err != nil || !found || !tgt.Blind || tgt.Unknown != 30 {
		t.Errorf("the blind target's judgment = %+v (found %t, %v)", tgt, found, err)
	}
	if seeing, _, _ := targetstore.New(f.e.fs, ledger.Retention{}).Get(context.Background(), targetB); seeing.Blind {
		t.Errorf("the seeing target was judged blind: %+v", seeing)
	}

	// The operator checks, and clears it: its rows settle lost.
	if err := targetstore.New(f.e.fs, ledger.Retention{}).Clear(context.Background(), targetA, "local:ops@host", f.e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.sweep(false)
	if n := f.lost(targetA); n != 30 {
		t.Errorf("after the clearance %d rows of the target were settled lost, want all 30", n)
	}
	t.Logf("blind target: 0 of 30 rows lost while blind (%d held over %d runs), 30 after the clearance; seeing target: 3 of 33 lost", held, len(stats))
}

// Eight runs at once over organizations of one blind target: the guard trips, no row slips
// through to a lost settlement, and the target's blind_since is the first judgment's.
func TestConcurrentSweepsOfABlindTargetSettleNothingLost(t *testing.T) {
	t.Parallel()
	f := newBlindFleet(t, 8, &lines{})
	f.blindRows(4)
	f.sweep(true)
	f.forget(f.rows[targetA]...)
	f.e.clock.Advance(10 * time.Minute)
	f.sweep(true)
	f.e.clock.Advance(20 * time.Minute)
	stats := f.sweep(true)
	if n := f.lost(targetA); n != 0 {
		t.Errorf("%d rows slipped through to a lost settlement, want 0 (min rows %d)", n, blindguard.MinRowsDefault)
	}
	held := 0
	for _, s := range stats {
		held += s.Blind[targetA]
	}
	if held != 32 {
		t.Errorf("%d rows held, want 32", held)
	}
	tgt, _, err := targetstore.New(f.e.fs, ledger.Retention{}).Get(context.Background(), targetA)
	if err != nil || !tgt.Blind || !tgt.BlindSince.Equal(f.e.clock.Now()) {
		t.Errorf("judgment = %+v, %v; want blind since the first judgment, at %v", tgt, err, f.e.clock.Now())
	}
	f.e.clock.Advance(2 * blindguard.Interval)
	f.sweep(true) // judged again: still blind, since the same time
	if again, _, _ := targetstore.New(f.e.fs, ledger.Retention{}).Get(context.Background(), targetA); !again.BlindSince.Equal(tgt.BlindSince) || !again.JudgedAt.After(tgt.JudgedAt) {
		t.Errorf("rejudged: %+v, want blind since %v, judged later", again, tgt.BlindSince)
	}
	if n := f.lost(targetA); n != 0 {
		t.Errorf("%d rows lost after a second round", n)
	}
}
