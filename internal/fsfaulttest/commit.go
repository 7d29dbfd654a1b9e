// Package fsfaulttest makes a Firestore client's commits ambiguous, for tests: a unary client
// interceptor lets a transaction's first Commit that carries writes reach the server and then
// answers the client with an error, as a connection lost after the request was sent would. The
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

	"github.com/stalesweep/stalesweep/internal/testenv"
)

// Commits is the fault. The zero value is not usable; use New.
type Commits struct {
	code codes.Code
	mu   sync.Mutex
	// before runs instead of the Commit when set: the commit never reaches the server.
	before   func()
	seen     map[string]bool // transactions whose commit was faulted
	faulted  int
	disabled bool
}

// New returns a fault that answers code to each transaction's first write commit, after the
// server applied it.
func New(code codes.Code) *Commits { return &Commits{code: code, seen: map[string]bool{}} }

// Lost returns a fault that drops each transaction's first write commit before it reaches the
// server, runs before in its place (another writer, say), and answers code.
func Lost(code codes.Code, before func()) *Commits {
	c := New(code)
	c.before = before
	return c
}

// DialOptions returns the interceptor to dial Firestore with (ledger.Options.DialOptions).
func (c *Commits) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.unary)}
}

// Faulted returns how many commits the fault has answered with its error.
func (c *Commits) Faulted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faulted
}

// Disable lets every later commit through untouched.
func (c *Commits) Disable() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disabled = true
}

func (c *Commits) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	commit, ok := req.(*firestorepb.CommitRequest)
	if !ok || len(commit.GetWrites()) == 0 || len(commit.GetTransaction()) == 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c.mu.Lock()
	tx := string(commit.GetTransaction())
	first := !c.disabled && !c.seen[tx]
	c.seen[tx] = true
	if first {
		c.faulted++
	}
	before := c.before
	c.mu.Unlock()
	switch {
	case !first:
		return invoker(ctx, method, req, reply, cc, opts...)
	case before != nil:
		before()
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
