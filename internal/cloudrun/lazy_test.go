package cloudrun

import (
	"context"
	"errors"
	"testing"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
)

func TestLazyDialsOnFirstUseAndRetriesAFailedDial(t *testing.T) {
	fake, err := cloudrunfake.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	dials := 0
	l := &Lazy{dial: func(ctx context.Context) (*run.ExecutionsClient, error) {
		dials++
		if dials == 1 {
			return nil, errors.New("no credentials")
		}
		return Dial(ctx, fake.Addr)
	}}
	defer l.Close()
	if dials != 0 {
		t.Fatal("dialed before first use")
	}
	req := &runpb.GetExecutionRequest{Name: cloudrunfake.ExecutionName("p", "l", "j", "e")}
	if _, err := l.GetExecution(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("failed dial: %v, want Unauthenticated", err)
	}
	if _, err := l.GetExecution(context.Background(), req); status.Code(err) != codes.NotFound {
		t.Errorf("second call: %v, want the fake's NotFound", err)
	}
	if _, err := l.GetExecution(context.Background(), req); status.Code(err) != codes.NotFound || dials != 2 {
		t.Errorf("third call dialed again (%d dials): %v", dials, err)
	}
}
