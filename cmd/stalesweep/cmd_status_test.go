package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/blindguard/targetstore"
	"github.com/stalesweep/stalesweep/internal/fleet"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// TestStatusShowsTheNextTickFleetWideAndWritesNothing holds the fleet view to four
// organizations: one with stale rows, one quiet, one paused, one opted out; and a blind target.
func TestStatusShowsTheNextTickFleetWideAndWritesNothing(t *testing.T) {
	fake, fs, _ := cloudRunWorld(t)
	stale, quiet, paused, optedOut := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, stale, quiet, paused)
	if err := (ledgertest.Organizations{Client: fs}).Put(t.Context(), ledger.Organization{UUID: optedOut}); err != nil {
		t.Fatal(err)
	}
	staleRow(t, fs, fake, stale, "row-stale-old", cloudrunfake.Running)
	staleRow(t, fs, fake, stale, "row-stale-older", cloudrunfake.Running)
	if _, err := fs.Collection(ledger.ExecutionsCollection).Doc("row-stale-older").Update(t.Context(),
		[]firestore.Update{{Path: "observed_at", Value: time.Now().Add(-3 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	staleRow(t, fs, fake, paused, "row-paused", cloudrunfake.Running)
	staleRow(t, fs, fake, optedOut, "row-opted-out", cloudrunfake.Running)
	if code, _, stderr := invoke(t, "pause", syncType, "--scope", paused, "--reason", "INC-9"); code != exitOK {
		t.Fatalf("pause: %d %s", code, stderr)
	}
	if _, err := targetstore.New(fs, ledger.Retention{}).Record(t.Context(), ledger.Target{Target: "cloud_run:projects/p/locations/l", Blind: true, JudgedAt: time.Now(), Asked: 10, Unknown: 9}); err != nil {
		t.Fatal(err)
	}
	before := documents(t, fs)

	code, out, stderr := invoke(t, "status", "-o", "json")
	if code != exitOK {
		t.Fatalf("status: exit %d, %s", code, stderr)
	}
	var st fleet.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	var sync *fleet.WorkflowStatus
	for i := range st.Workflows {
		if st.Workflows[i].WorkflowType == syncType {
			sync = &st.Workflows[i]
		}
	}
	if sync == nil || len(st.Workflows) != 5 {
		t.Fatalf("workflows %+v", st.Workflows)
	}
	if len(sync.Work) != 1 || sync.Work[0].Scope != stale || sync.WorkMore != 0 {
		t.Fatalf("scopes with work %+v (and %d more), want only %s", sync.Work, sync.WorkMore, stale)
	}
	if o := sync.Work[0].OldestStale; o == nil || o.RunnerExecutionUUID != "row-stale-older" || o.AgeSeconds < 3*3600-60 {
		t.Errorf("oldest stale row %+v, want row-stale-older, 3h old", o)
	}
	if r := sync.Dispatch; r.Scopes != 3 || r.Paused != 1 || r.Quiet != 1 || r.Published != 1 {
		t.Errorf("dispatch report %+v: want 3 scopes, 1 paused, 1 quiet, 1 with work", r)
	}
	if len(sync.Paused) != 1 || sync.Paused[0].Scope != paused || sync.Paused[0].Reason != "INC-9" {
		t.Errorf("pauses %+v", sync.Paused)
	}
	if !slices.Equal(st.OptedOut, []string{optedOut}) {
		t.Errorf("opted out %v, want [%s]", st.OptedOut, optedOut)
	}
	if len(st.BlindTargets) != 1 || st.BlindTargets[0].Unknown != 9 {
		t.Errorf("blind targets %+v", st.BlindTargets)
	}
	if after := documents(t, fs); !slices.Equal(before, after) {
		t.Errorf("status wrote: documents before %v, after %v", before, after)
	}

	// The last run shows once there is one; the table names what the JSON does; --limit cuts.
	if code, _, stderr := invoke(t, "run", syncType, "--data", `{"organization_uuid": "`+stale+`"}`); code != exitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	staleRow(t, fs, fake, stale, "row-again", cloudrunfake.Running)
	staleRow(t, fs, fake, quiet, "row-quiet-now", cloudrunfake.Running)
	code, out, _ = invoke(t, "status", "--limit", "1")
	for _, want := range []string{syncType + ": 3 scopes, 2 with work, 0 quiet, 1 paused", "last run: ", "completed", "and 1 more scopes with work",
		"paused: " + syncType + " paused on " + paused, "opted out (sweeps_enabled: false): " + optedOut, "blind target: cloud_run:projects/p/locations/l"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("status table: exit %d, no %q in\n%s", code, want, out)
		}
	}
}

func TestStatusRefusesBadArgumentsNamingThem(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "never-reached")
	refusesNaming(t, []refusal{
		{[]string{"status", "--limit", "0"}, "--limit"},
		{[]string{"status", "--limit", "1001"}, "--limit"},
		{[]string{"status", "--data", "pm.sweep"}, "--data"},
		{[]string{"status", "--data", "nope={}"}, "--data"},
		{[]string{"status", "--data", "pm.sweep=[]"}, "--data"},
		{[]string{"status", "--data", "pm.sweep={}", "--data", "pm.sweep={}"}, "twice"},
		{[]string{"status", "-o", "yaml"}, "--output"},
	})
}

// documents lists every top-level document of the project with its update time: a write shows
// as a new name or a new time.
func documents(t *testing.T, fs *firestore.Client) []string {
	t.Helper()
	cols, err := fs.Collections(t.Context()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, col := range cols {
		snaps, err := col.Documents(t.Context()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			out = append(out, fmt.Sprintf("%s@%s", s.Ref.Path, s.UpdateTime.Format(time.RFC3339Nano)))
		}
	}
	slices.Sort(out)
	return out
}
