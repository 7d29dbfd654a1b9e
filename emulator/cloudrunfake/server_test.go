package cloudrunfake_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/testkit/cloudruntest"
)

var at = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func TestGetExecutionReturnsWhatWasStored(t *testing.T) {
	s, c := cloudruntest.Start(t)
	name := cloudrunfake.ExecutionName("p", "l", "job", "job-1")
	want := cloudrunfake.Succeeded(name, at)
	if err := s.SetExecution(want); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetExecution(context.Background(), &runpb.GetExecutionRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetEtag() == "" || got.GetUid() == "" || got.GetJob() != "job" {
		t.Errorf("stored execution lacks etag, uid or job: %v", got)
	}
	got.Etag, got.Uid, got.Generation, got.ObservedGeneration, got.UpdateTime = "", "", 0, 0, nil
	if !proto.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestGetExecutionStatusCodes(t *testing.T) {
	_, c := cloudruntest.Start(t)
	tests := []struct {
		name string
		want codes.Code
	}{
		{cloudrunfake.ExecutionName("p", "l", "job", "missing"), codes.NotFound},
		{"projects/p/locations/l/jobs/job", codes.InvalidArgument},
		{"executions/e", codes.InvalidArgument},
		{"projects//locations/l/jobs/j/executions/e", codes.InvalidArgument},
	}
	for _, tt := range tests {
		_, err := c.GetExecution(context.Background(), &runpb.GetExecutionRequest{Name: tt.name})
		if status.Code(err) != tt.want {
			t.Errorf("GetExecution(%q) = %v, want %s", tt.name, err, tt.want)
		}
	}
}

func TestSetExecutionChangesTheEtag(t *testing.T) {
	s, _ := cloudruntest.Start(t)
	name := cloudrunfake.ExecutionName("p", "l", "job", "job-1")
	_ = s.SetExecution(cloudrunfake.Running(name, at))
	first, _ := s.Execution(name)
	_ = s.SetExecution(cloudrunfake.Succeeded(name, at))
	second, _ := s.Execution(name)
	if first.GetEtag() == second.GetEtag() || second.GetGeneration() <= first.GetGeneration() {
		t.Errorf("etag/generation did not move: %s/%d then %s/%d", first.GetEtag(), first.GetGeneration(), second.GetEtag(), second.GetGeneration())
	}
}

func TestListExecutionsPagesNewestFirstWithinOneJob(t *testing.T) {
	s, c := cloudruntest.Start(t)
	for i := range 7 {
		n := cloudrunfake.ExecutionName("p", "l", "job", "job-"+string(rune('a'+i)))
		if err := s.SetExecution(cloudrunfake.Running(n, at.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.SetExecution(cloudrunfake.Running(cloudrunfake.ExecutionName("p", "l", "other", "other-1"), at))
	_ = s.SetExecution(cloudrunfake.Running(cloudrunfake.ExecutionName("p", "l2", "job", "job-x"), at))

	it := c.ListExecutions(context.Background(), &runpb.ListExecutionsRequest{Parent: "projects/p/locations/l/jobs/job", PageSize: 3})
	var names []string
	for {
		e, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.GetName()[strings.LastIndex(e.GetName(), "/")+1:])
	}
	if got, want := strings.Join(names, ","), "job-g,job-f,job-e,job-d,job-c,job-b,job-a"; got != want {
		t.Errorf("listed %s, want %s", got, want)
	}
	if got := s.Calls(cloudrunfake.ListExecutions); got != 3 {
		t.Errorf("ListExecutions calls = %d, want 3 pages", got)
	}

	all := c.ListExecutions(context.Background(), &runpb.ListExecutionsRequest{Parent: "projects/p/locations/l/jobs/-"})
	n := 0
	for {
		if _, err := all.Next(); err == iterator.Done {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 8 {
		t.Errorf("listing across jobs found %d, want 8", n)
	}
	_, err := c.ListExecutions(context.Background(), &runpb.ListExecutionsRequest{Parent: "projects/p"}).Next()
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad parent: %v, want InvalidArgument", err)
	}
}

func TestCancelExecution(t *testing.T) {
	s, c := cloudruntest.Start(t, cloudrunfake.WithClock(func() time.Time { return at }))
	name := cloudrunfake.ExecutionName("p", "l", "job", "job-1")
	_ = s.SetExecution(cloudrunfake.Running(name, at.Add(-time.Hour)))

	op, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	got, err := op.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap := cloudrun.Classify(got)
	if snap.Verdict != "cancelled" || !snap.FinishedAt.Equal(at) {
		t.Errorf("after cancel: verdict %s at %v, want cancelled at %v", snap.Verdict, snap.FinishedAt, at)
	}
	if got.GetCancelledCount() != 1 || got.GetRunningCount() != 0 {
		t.Errorf("counts after cancel: cancelled %d running %d", got.GetCancelledCount(), got.GetRunningCount())
	}
	if _, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: name}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancelling a cancelled execution: %v, want FailedPrecondition", err)
	}
	done := cloudrunfake.ExecutionName("p", "l", "job", "job-2")
	_ = s.SetExecution(cloudrunfake.Succeeded(done, at))
	if _, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: done}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancelling a succeeded execution: %v, want FailedPrecondition", err)
	}
	if _, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: cloudrunfake.ExecutionName("p", "l", "job", "none")}); status.Code(err) != codes.NotFound {
		t.Errorf("cancelling a missing execution: %v, want NotFound", err)
	}
	cancelling := cloudrunfake.ExecutionName("p", "l", "job", "job-3")
	_ = s.SetExecution(cloudrunfake.Cancelling(cancelling, at))
	if _, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: cancelling}); err != nil {
		t.Errorf("cancelling an execution already cancelling: %v, want success", err)
	}
	stale := cloudrunfake.ExecutionName("p", "l", "job", "job-4")
	_ = s.SetExecution(cloudrunfake.Running(stale, at))
	if _, err := c.CancelExecution(context.Background(), &runpb.CancelExecutionRequest{Name: stale, Etag: `"nope"`}); status.Code(err) != codes.Aborted {
		t.Errorf("cancel with a stale etag: %v, want Aborted", err)
	}
}

func TestFaultInjection(t *testing.T) {
	s, c := cloudruntest.Start(t, cloudrunfake.WithSeed(7))
	name := cloudrunfake.ExecutionName("p", "l", "job", "job-1")
	_ = s.SetExecution(cloudrunfake.Running(name, at))
	get := func() error {
		_, err := c.GetExecution(context.Background(), &runpb.GetExecutionRequest{Name: name})
		return err
	}

	s.FailNext(cloudrunfake.GetExecution, codes.Unavailable, 2)
	for i, want := range []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK} {
		if got := status.Code(get()); got != want {
			t.Errorf("call %d: %s, want %s", i, got, want)
		}
	}

	s.FailRate(cloudrunfake.GetExecution, codes.Internal, 0.3)
	failed := 0
	for range 1000 {
		if status.Code(get()) == codes.Internal {
			failed++
		}
	}
	if failed < 230 || failed > 370 {
		t.Errorf("30%% fault rate failed %d of 1000 calls", failed)
	}
	s.ClearFaults()
	if err := get(); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
	if got := s.Calls(cloudrunfake.GetExecution); got != 1004 {
		t.Errorf("calls = %d, want 1004", got)
	}
	s.ResetCalls()
	if got := s.Calls(cloudrunfake.GetExecution); got != 0 {
		t.Errorf("calls after reset = %d", got)
	}
}

func TestLatencyRespectsTheCallerDeadline(t *testing.T) {
	s, c := cloudruntest.Start(t)
	name := cloudrunfake.ExecutionName("p", "l", "job", "job-1")
	_ = s.SetExecution(cloudrunfake.Running(name, at))
	s.SetLatency(cloudrunfake.GetExecution, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.GetExecution(ctx, &runpb.GetExecutionRequest{Name: name})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

func TestConcurrentCallsAreSafe(t *testing.T) {
	s, c := cloudruntest.Start(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := cloudrunfake.ExecutionName("p", "l", "job", "job-"+string(rune('a'+i)))
			_ = s.SetExecution(cloudrunfake.Running(n, at))
			for range 20 {
				if _, err := c.GetExecution(context.Background(), &runpb.GetExecutionRequest{Name: n}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := s.Calls(cloudrunfake.GetExecution); got != 320 {
		t.Errorf("calls = %d, want 320", got)
	}
}

func TestLoadExecutionsRoundTrips(t *testing.T) {
	execs := []*runpb.Execution{
		cloudrunfake.Succeeded(cloudrunfake.ExecutionName("p", "l", "j", "a"), at),
		cloudrunfake.Cancelling(cloudrunfake.ExecutionName("p", "l", "j", "b"), at),
	}
	b, err := cloudrunfake.MarshalExecutions(execs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cloudrunfake.LoadExecutions(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !proto.Equal(got[0], execs[0]) || !proto.Equal(got[1], execs[1]) {
		t.Errorf("round trip changed the executions:\n%s", b)
	}
	for _, bad := range []string{`{}`, `[{"name": "nope"}]`, `[{"name": 3}]`, `[{"conditions": "x"}]`, `not json`} {
		if _, err := cloudrunfake.LoadExecutions(strings.NewReader(bad)); err == nil {
			t.Errorf("LoadExecutions(%s) accepted it", bad)
		}
	}
	// Original proto field names and enum names are accepted too.
	raw := `[{"name": "projects/p/locations/l/jobs/j/executions/c", "task_count": 1,
	  "conditions": [{"type": "Completed", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": "2026-11-29T08:00:00Z"}]}]`
	got, err = cloudrunfake.LoadExecutions(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if v := cloudrun.Classify(got[0]).Verdict; v != "succeeded" {
		t.Errorf("loaded execution classifies as %s", v)
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	if _, err := cloudrunfake.Listen("0.0.0.0:0"); err == nil {
		t.Error("Listen on 0.0.0.0 succeeded")
	}
}
