package cloudrun

import (
	"context"
	"fmt"
	"net"

	run "cloud.google.com/go/run/apiv2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// EndpointEnv names the variable that points the adapter at a local fake instead of Cloud Run.
const EndpointEnv = "STALESWEEP_CLOUD_RUN_ENDPOINT"

// Dial returns an Executions client. With endpoint empty it talks to Cloud Run with Application
// Default Credentials; otherwise endpoint is a host:port on loopback served in plaintext gRPC
// without authentication (the fake in emulator/cloudrunfake), and anything off loopback is
// refused so a typo cannot send unauthenticated traffic across a network.
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

// RequireLoopback returns an error unless addr is a host:port whose host is a loopback IP or
// "localhost".
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
