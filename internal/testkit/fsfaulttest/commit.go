// Package fsfaulttest makes a Firestore client's commits ambiguous, for tests: a unary client
// interceptor lets the first transactional Commit that writes a document reach the server and
// then answers the client with an error, as a connection lost after the request was sent would;
// every later commit writing that document goes through. The
// Go client retries a Commit that failed Unavailable with the same transaction, which the
// server has closed by then (InvalidArgument "Transaction is invalid or closed"); one failed
// DeadlineExceeded it returns as it is. Either way the writes have landed and the client was
// told they may not have.
//
// Test tooling only: no product package imports it.
package fsfaulttest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/firestore"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// Commits is the fault. The zero value is not usable; use New.
type Commits struct {
	code    codes.Code
	mu      sync.Mutex
	lost    bool            // the commit never reaches the server
	before  func()          // runs in a lost commit's place, when set
	seen    map[string]bool // documents (a commit's first write) whose commit was faulted
	faulted int
}

// New returns a fault that answers code to the first write commit of each document, after the
// server applied it.
func New(code codes.Code) *Commits { return &Commits{code: code, seen: map[string]bool{}} }

// Lost returns a fault that drops the first write commit of each document before it reaches
// the server, runs before (when not nil) in its place, and answers code.
func Lost(code codes.Code, before func()) *Commits {
	c := New(code)
	c.lost, c.before = true, before
	return c
}

// DialOptions returns the interceptor to dial Firestore with (firestoreconn.Options.DialOptions).
func (c *Commits) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.unary)}
}

// Faulted returns how many commits the fault has answered with its error.
func (c *Commits) Faulted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faulted
}

func (c *Commits) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	commit, ok := req.(*firestorepb.CommitRequest)
	if !ok || len(commit.GetWrites()) == 0 || len(commit.GetTransaction()) == 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c.mu.Lock()
	doc := commit.GetWrites()[0].GetUpdate().GetName() + commit.GetWrites()[0].GetDelete()
	first := !c.seen[doc]
	c.seen[doc] = true
	if first {
		c.faulted++
	}
	c.mu.Unlock()
	switch {
	case !first:
		return invoker(ctx, method, req, reply, cc, opts...)
	case c.lost:
		if c.before != nil {
			c.before()
		}
	default:
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
	}
	return status.Error(c.code, "fsfaulttest: the commit's answer was lost")
}

// Client returns a second client on the project of c, with the fault on its connection:
// rows are written through c, untouched, and the code under test is given the faulted one.
func (c *Commits) Client(t testing.TB, of *firestore.Client) *firestore.Client {
	t.Helper()
	// A collection's path is projects/PROJECT/databases/(default)/documents/NAME.
	parts := strings.Split(of.Collection("x").Path, "/")
	return testenv.FirestoreProject(t, parts[1], c.DialOptions()...)
}
