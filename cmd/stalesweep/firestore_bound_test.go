package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// frozenServer accepts every connection and never answers: a Firestore that hangs.
func frozenServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// A call or a stream whose context has no deadline gets callTimeout's, and one with a later
// deadline the earlier of the two: against a server that never answers each ends
// DeadlineExceeded within about the bound.
func TestCallTimeoutBoundsEveryCallWithoutAnEarlierDeadline(t *testing.T) {
	const bound = 300 * time.Millisecond
	conn, err := grpc.NewClient("passthrough:///"+frozenServer(t),
		append(callTimeout(bound, nil), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	later, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	// Without the bound a call would never end: each is waited for at most giveUp.
	const giveUp = 10 * bound
	within := func(what string, call func() error) {
		t.Helper()
		start, done := time.Now(), make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took > 5*bound {
				t.Errorf("%s: %v after %s, want DeadlineExceeded within %s", what, err, took, 5*bound)
			}
		case <-time.After(giveUp):
			t.Errorf("%s: still waiting after %s, want DeadlineExceeded within %s", what, giveUp, 5*bound)
		}
	}
	for name, ctx := range map[string]context.Context{"no deadline": context.Background(), "a later deadline": later} {
		within("unary, "+name, func() error {
			return conn.Invoke(ctx, "/google.firestore.v1.Firestore/GetDocument", &emptypb.Empty{}, &emptypb.Empty{}, grpc.WaitForReady(true))
		})
		within("stream, "+name, func() error {
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.firestore.v1.Firestore/RunQuery", grpc.WaitForReady(true))
			if err == nil {
				err = s.RecvMsg(&emptypb.Empty{})
			}
			return err
		})
	}
}
