package cloudrun

import (
	"context"
	"fmt"
	"net"
	"sync"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// EndpointEnv names the variable that points the adapter at a local fake instead of Cloud Run.
const EndpointEnv = "STALESWEEP_CLOUD_RUN_ENDPOINT"

// Dial returns an Executions client: to Cloud Run with Application Default Credentials when
// endpoint is empty, else to a plaintext, unauthenticated fake (emulator/cloudrunfake), refused
// off loopback so a typo cannot send unauthenticated traffic across a network.
func Dial(ctx context.Context, endpoint string, opts ...option.ClientOption) (*run.ExecutionsClient, error) {
	if endpoint == "" {
		c, err := run.NewExecutionsClient(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("dial cloud run: %w", err)
		}
		return c, nil
	}
	if err := RequireLoopback(endpoint); err != nil {
		return nil, fmt.Errorf("%s: %w", EndpointEnv, err)
	}
	opts = append([]option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, opts...)
	c, err := run.NewExecutionsClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial cloud run fake at %s: %w", endpoint, err)
	}
	return c, nil
}

// RequireLoopback returns an error unless addr is host:port on a loopback IP or "localhost".
func RequireLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("address %q is not host:port", addr)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q is not on loopback (plaintext, unauthenticated gRPC is allowed only there)", addr)
	}
	return nil
}

// Lazy is an ExecutionGetter that dials on its first call (and again after a failed dial), so a
// process that never asks Cloud Run anything needs no Cloud Run credentials.
type Lazy struct {
	dial func(ctx context.Context) (*run.ExecutionsClient, error)

	mu     sync.Mutex
	client *run.ExecutionsClient
}

// NewLazy returns a client that dials endpoint (see Dial) when first used.
func NewLazy(endpoint string, opts ...option.ClientOption) *Lazy {
	return &Lazy{dial: func(ctx context.Context) (*run.ExecutionsClient, error) { return Dial(ctx, endpoint, opts...) }}
}

func (l *Lazy) get(ctx context.Context) (*run.ExecutionsClient, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		return l.client, nil
	}
	c, err := l.dial(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unauthenticated, "%v", err)
	}
	l.client = c
	return c, nil
}

// GetExecution dials if needed and calls Cloud Run. A failed dial is Unauthenticated: the
// sweeper cannot reach Cloud Run with the credentials it has.
func (l *Lazy) GetExecution(ctx context.Context, req *runpb.GetExecutionRequest, opts ...gax.CallOption) (*runpb.Execution, error) {
	c, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.GetExecution(ctx, req, opts...)
}

// Close closes the client if it was dialed.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client == nil {
		return nil
	}
	err := l.client.Close()
	l.client = nil
	return err
}
