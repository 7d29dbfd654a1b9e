package cloudrunfake

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Page sizes ListExecutions uses, as Cloud Run documents them.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// GetExecution returns one execution by name.
func (s *Server) GetExecution(ctx context.Context, req *runpb.GetExecutionRequest) (*runpb.Execution, error) {
	if err := s.enter(ctx, GetExecution); err != nil {
		return nil, err
	}
	p, err := parseExecution(req.GetName())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[req.GetName()]
	if !ok {
		return nil, p.notFound()
	}
	return proto.Clone(e).(*runpb.Execution), nil
}

// ListExecutions lists a job's executions, newest first, a page at a time.
func (s *Server) ListExecutions(ctx context.Context, req *runpb.ListExecutionsRequest) (*runpb.ListExecutionsResponse, error) {
	if err := s.enter(ctx, ListExecutions); err != nil {
		return nil, err
	}
	parent := req.GetParent()
	parts := strings.Split(parent, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "jobs" ||
		parts[1] == "" || parts[3] == "" || parts[5] == "" {
		return nil, status.Errorf(codes.InvalidArgument, "invalid parent %q: want projects/{project}/locations/{location}/jobs/{job}", parent)
	}
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, status.Errorf(codes.InvalidArgument, "page_size must not be negative")
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	offset := 0
	if tok := req.GetPageToken(); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err == nil {
			offset, err = strconv.Atoi(strings.TrimPrefix(string(raw), "offset:"))
		}
		if err != nil || offset < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "invalid page_token")
		}
	}

	s.mu.Lock()
	var matched []*runpb.Execution
	for name, e := range s.execs {
		p, err := parseExecution(name)
		if err != nil || p.project != parts[1] || p.location != parts[3] || (parts[5] != "-" && p.job != parts[5]) {
			continue
		}
		matched = append(matched, proto.Clone(e).(*runpb.Execution))
	}
	s.mu.Unlock()

	slices.SortFunc(matched, func(a, b *runpb.Execution) int {
		if c := b.GetCreateTime().AsTime().Compare(a.GetCreateTime().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	resp := &runpb.ListExecutionsResponse{}
	if offset >= len(matched) {
		return resp, nil
	}
	end := min(offset+size, len(matched))
	resp.Executions = matched[offset:end]
	if end < len(matched) {
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	return resp, nil
}

// CancelExecution cancels a running execution at once and returns a done operation whose
// response is the cancelled execution.
func (s *Server) CancelExecution(ctx context.Context, req *runpb.CancelExecutionRequest) (*longrunningpb.Operation, error) {
	if err := s.enter(ctx, CancelExecution); err != nil {
		return nil, err
	}
	p, err := parseExecution(req.GetName())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[req.GetName()]
	if !ok {
		return nil, p.notFound()
	}
	if req.GetEtag() != "" && req.GetEtag() != e.GetEtag() {
		return nil, status.Errorf(codes.Aborted, "etag %s does not match the execution's current etag", req.GetEtag())
	}
	if done := completedState(e); done == runpb.Condition_CONDITION_SUCCEEDED || done == runpb.Condition_CONDITION_FAILED && !cancelling(e) {
		return nil, status.Errorf(codes.FailedPrecondition, "execution %s has already completed", p.execution)
	}
	now := timestamppb.New(s.now())
	if req.GetValidateOnly() {
		return operation(p, e, now)
	}
	e.CancelledCount += e.RunningCount + max(0, e.TaskCount-e.RunningCount-e.SucceededCount-e.FailedCount-e.CancelledCount)
	e.RunningCount = 0
	e.Reconciling = false
	e.CompletionTime = now
	setCondition(e, &runpb.Condition{
		Type:               "Completed",
		State:              runpb.Condition_CONDITION_FAILED,
		Message:            "The execution was cancelled.",
		LastTransitionTime: now,
		Reasons:            &runpb.Condition_ExecutionReason_{ExecutionReason: runpb.Condition_CANCELLED},
	})
	s.stamp(e)
	return operation(p, e, now)
}

func operation(p resourceName, e *runpb.Execution, now *timestamppb.Timestamp) (*longrunningpb.Operation, error) {
	resp, err := anypb.New(e)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "pack execution: %v", err)
	}
	return &longrunningpb.Operation{
		Name:   fmt.Sprintf("projects/%s/locations/%s/operations/cancel-%s-%d", p.project, p.location, p.execution, now.AsTime().UnixNano()),
		Done:   true,
		Result: &longrunningpb.Operation_Response{Response: resp},
	}, nil
}

func completedState(e *runpb.Execution) runpb.Condition_State {
	for _, c := range e.GetConditions() {
		if c.GetType() == "Completed" {
			return c.GetState()
		}
	}
	return runpb.Condition_STATE_UNSPECIFIED
}

func cancelling(e *runpb.Execution) bool {
	for _, c := range e.GetConditions() {
		if c.GetType() == "Completed" {
			return c.GetExecutionReason() == runpb.Condition_CANCELLING
		}
	}
	return false
}

// setCondition replaces the condition of c's type, or appends it.
func setCondition(e *runpb.Execution, c *runpb.Condition) {
	for i, old := range e.Conditions {
		if old.GetType() == c.GetType() {
			e.Conditions[i] = c
			return
		}
	}
	e.Conditions = append(e.Conditions, c)
}

// resourceName is a parsed execution name.
type resourceName struct {
	project, location, job, execution string
}

func parseExecution(name string) (resourceName, error) {
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "jobs" || parts[6] != "executions" ||
		parts[1] == "" || parts[3] == "" || parts[5] == "" || parts[7] == "" {
		return resourceName{}, status.Errorf(codes.InvalidArgument,
			"invalid resource name %q: want projects/{project}/locations/{location}/jobs/{job}/executions/{execution}", name)
	}
	return resourceName{project: parts[1], location: parts[3], job: parts[5], execution: parts[7]}, nil
}

func (p resourceName) notFound() error {
	return status.Errorf(codes.NotFound, "Resource '%s' of kind 'EXECUTION' in region '%s' in project '%s' does not exist.",
		p.execution, p.location, p.project)
}
