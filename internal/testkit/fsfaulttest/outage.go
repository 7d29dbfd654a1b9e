package fsfaulttest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// Outage is Firestore going away for one client: while it is down, every call the client makes
// fails Unavailable before it leaves the process, unary and streaming alike, as a dead network
// would answer. The client's own retries then run until their caller's deadline.
type Outage struct{ down atomic.Bool }

// Down starts the outage; Up ends it.
func (o *Outage) Down() { o.down.Store(true) }

// Up ends the outage.
func (o *Outage) Up() { o.down.Store(false) }

// DialOptions returns the interceptors to dial Firestore with.
func (o *Outage) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if o.down.Load() {
				return status.Error(codes.Unavailable, "fsfaulttest: Firestore is down")
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if o.down.Load() {
				return nil, status.Error(codes.Unavailable, "fsfaulttest: Firestore is down")
			}
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// Client returns a second client on the project of of, dialled through the outage.
func (o *Outage) Client(t testing.TB, of *firestore.Client) *firestore.Client {
	t.Helper()
	parts := strings.Split(of.Collection("x").Path, "/")
	return testenv.FirestoreProject(t, parts[1], o.DialOptions()...)
}
