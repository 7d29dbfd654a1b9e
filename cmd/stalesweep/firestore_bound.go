package main

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callTimeout bounds every Firestore call on the connection to d: a unary call or a stream
// whose context has no deadline, or a later one, gets one d from now. A Firestore that accepts
// connections and never answers then fails each call within d instead of holding the caller
// for as long as its context allows (the client's own retries are each bounded the same way).
// timedOut, when set, is called for each call or stream that ends DeadlineExceeded.
func callTimeout(d time.Duration, timedOut func()) []grpc.DialOption {
	bound := func(ctx context.Context) (context.Context, context.CancelFunc) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
			return ctx, func() {}
		}
		return context.WithTimeout(ctx, d)
	}
	note := func(err error) {
		if timedOut != nil && (status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)) {
			timedOut()
		}
	}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, cancel := bound(ctx)
		defer cancel()
		err := invoker(ctx, method, req, reply, cc, opts...)
		note(err)
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, cancel := bound(ctx)
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			cancel()
			note(err)
			return nil, err
		}
		return &boundedStream{ClientStream: s, cancel: cancel, note: note}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// boundedStream releases its deadline's timer when the stream ends; one its caller abandons is
// released by the deadline itself.
type boundedStream struct {
	grpc.ClientStream
	cancel context.CancelFunc
	note   func(error)
}

func (s *boundedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.cancel()
		if err != io.EOF {
			s.note(err)
		}
	}
	return err
}
