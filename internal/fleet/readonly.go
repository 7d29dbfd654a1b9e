package fleet

import (
	"context"
	"strings"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReadOnly returns the dial options of a Firestore connection that refuses every write
// (firestoreconn.Options.DialOptions): a Commit that carries writes, a BatchWrite and the Write stream
// fail with PermissionDenied before they leave the process. Reads, queries and transactions
// that only read pass. Status runs the dispatcher on it, so a tick that would rebuild the roster
// only lists.
func ReadOnly() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(refuseWrites), grpc.WithChainStreamInterceptor(refuseWriteStream)}
}

// errReadOnly is what a refused write answers.
var errReadOnly = status.Error(codes.PermissionDenied, "this connection is read-only: the fleet view writes nothing")

func refuseWrites(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch r := req.(type) {
	case *firestorepb.CommitRequest:
		if len(r.GetWrites()) > 0 {
			return errReadOnly
		}
	case *firestorepb.BatchWriteRequest:
		return errReadOnly
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func refuseWriteStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if strings.HasSuffix(method, "/Write") {
		return nil, errReadOnly
	}
	return streamer(ctx, desc, cc, method, opts...)
}
