// Package cloudrunfake is an in-process fake of the Cloud Run Admin API v2 Executions service,
// in the mould of google-cloud-go's pstest: a real gRPC server on a loopback port that the real
// client (cloud.google.com/go/run/apiv2) talks to unchanged.
//
// How faithful it is:
//   - GetExecution, ListExecutions and CancelExecution are served; DeleteExecution is not
//     (Unimplemented, as the embedded UnimplementedExecutionsServer answers).
//   - Resource names are checked as Cloud Run checks them (InvalidArgument for a malformed
//     name), a missing execution is NotFound, cancelling a finished execution is
//     FailedPrecondition. Messages are close to Cloud Run's but not byte-identical.
//   - ListExecutions sorts by create_time descending, pages with an opaque token, and accepts
//     "-" as the job to list across jobs. It does not filter (neither does Cloud Run).
//   - CancelExecution completes at once: the returned long-running operation is already done,
//     and the execution becomes FAILED with reason CANCELLED. Cloud Run passes through CANCELLING
//     first; put an execution in that state with Cancelling to test it.
//   - Every stored execution gets a fresh etag and generation on each change. Conditions are
//     whatever the test put there: the fake does not run tasks or move states by itself.
//   - Not modelled: IAM, quotas (inject ResourceExhausted instead), the 1,000-executions-per-job
//     and 7-day retention (remove executions instead), long-running operation polling.
//
// All state is under one lock. Faults (an error for the next n calls, or for a seeded random
// fraction of calls) and latency are injected per method, and every call is counted.
package cloudrunfake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Method names a served RPC, for faults, latency and call counts.
type Method string

// The served methods.
const (
	GetExecution    Method = "GetExecution"
	ListExecutions  Method = "ListExecutions"
	CancelExecution Method = "CancelExecution"
)

// Server is the fake. Create it with NewServer or Listen; stop it with Close.
type Server struct {
	runpb.UnimplementedExecutionsServer

	// Addr is the host:port the server listens on.
	Addr string

	gsrv *grpc.Server
	done chan struct{}

	mu      sync.Mutex
	now     func() time.Time
	rng     *rand.Rand
	execs   map[string]*runpb.Execution
	gen     int64
	faults  map[Method]*fault
	latency map[Method]time.Duration
	calls   map[Method]int
}

type fault struct {
	code      codes.Code
	remaining int     // calls left to fail; -1 means use rate
	rate      float64 // fraction of calls that fail when remaining is -1
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock the fake stamps create, completion and transition times with.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithSeed seeds the random source behind FailRate, for reproducible fault patterns.
func WithSeed(seed uint64) Option {
	return func(s *Server) { s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// NewServer starts a fake on a free loopback port.
func NewServer(opts ...Option) (*Server, error) { return Listen("127.0.0.1:0", opts...) }

// Listen starts a fake on addr, which must be on loopback.
func Listen(addr string, opts ...Option) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("listen %q: the fake serves on loopback only", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", addr, err)
	}
	s := &Server{
		Addr:    lis.Addr().String(),
		gsrv:    grpc.NewServer(),
		done:    make(chan struct{}),
		now:     time.Now,
		rng:     rand.New(rand.NewPCG(1, 2)),
		execs:   make(map[string]*runpb.Execution),
		faults:  make(map[Method]*fault),
		latency: make(map[Method]time.Duration),
		calls:   make(map[Method]int),
	}
	for _, o := range opts {
		o(s)
	}
	runpb.RegisterExecutionsServer(s.gsrv, s)
	go func() {
		defer close(s.done)
		_ = s.gsrv.Serve(lis)
	}()
	return s, nil
}

// Close stops the server, ending calls in flight, and waits for it to exit.
func (s *Server) Close() {
	s.gsrv.Stop()
	<-s.done
}

// SetExecution stores a copy of e under e.Name, replacing any execution of that name. It fills
// uid, create_time and job when they are empty, and stamps a new etag and generation.
func (s *Server) SetExecution(e *runpb.Execution) error {
	p, err := parseExecution(e.GetName())
	if err != nil {
		return err
	}
	e = proto.Clone(e).(*runpb.Execution)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Uid == "" {
		e.Uid = fmt.Sprintf("uid-%s-%s", p.job, p.execution)
	}
	if e.CreateTime == nil {
		e.CreateTime = timestamppb.New(s.now())
	}
	if e.Job == "" {
		e.Job = p.job
	}
	s.stamp(e)
	s.execs[e.Name] = e
	return nil
}

// RemoveExecution forgets an execution, as Cloud Run does once it ages out.
func (s *Server) RemoveExecution(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.execs, name)
}

// Execution returns a copy of the stored execution named name.
func (s *Server) Execution(name string) (*runpb.Execution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[name]
	if !ok {
		return nil, false
	}
	return proto.Clone(e).(*runpb.Execution), true
}

// FailNext makes the next n calls of m fail with code.
func (s *Server) FailNext(m Method, code codes.Code, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[m] = &fault{code: code, remaining: n}
}

// FailRate makes a random fraction (0..1) of the calls of m fail with code, until ClearFaults.
func (s *Server) FailRate(m Method, code codes.Code, rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[m] = &fault{code: code, remaining: -1, rate: rate}
}

// ClearFaults removes every injected fault and latency.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
	clear(s.latency)
}

// SetLatency delays every call of m by d before it is answered (or until its deadline).
func (s *Server) SetLatency(m Method, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[m] = d
}

// Calls returns how many calls of m the server has received, failed ones included.
func (s *Server) Calls(m Method) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[m]
}

// ResetCalls sets every call count back to zero.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

// enter counts a call of m, waits its injected latency, and returns its injected fault, if any.
func (s *Server) enter(ctx context.Context, m Method) error {
	s.mu.Lock()
	s.calls[m]++
	delay := s.latency[m]
	var err error
	if f := s.faults[m]; f != nil {
		switch {
		case f.remaining > 0:
			f.remaining--
			err = status.Errorf(f.code, "injected %s fault", f.code)
		case f.remaining < 0 && s.rng.Float64() < f.rate:
			err = status.Errorf(f.code, "injected %s fault", f.code)
		}
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return err
}

// stamp gives e a new generation and etag; s.mu must be held.
func (s *Server) stamp(e *runpb.Execution) {
	s.gen++
	e.Generation = s.gen
	e.ObservedGeneration = s.gen
	e.Etag = fmt.Sprintf(`"%x"`, s.gen)
	e.UpdateTime = timestamppb.New(s.now())
}
