package workflow

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// StepError is a failure a body attributes to one of its steps and a layer of the stack.
type StepError struct {
	Step   string // e.g. "scan", "sync"
	Layer  string // e.g. "firestore", "executor", "workflow"
	Reason string // machine-readable, e.g. "scan_failed", "executor_permission_denied"
	Err    error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("%s (%s/%s): %v", e.Reason, e.Step, e.Layer, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Failure types.
const (
	FailureTransient = "transient" // the next run may well succeed
	FailurePermanent = "permanent" // an operator must change something first
)

func failure(err error, s State) *runstore.Failure {
	f := &runstore.Failure{
		Reason:    "internal_error",
		Step:      "body",
		Layer:     "workflow",
		AtState:   s.Name,
		Action:    s.Action,
		Error:     err.Error(),
		ErrorType: ErrorType(err),
		Type:      FailurePermanent,
	}
	var se *StepError
	if errors.As(err, &se) {
		f.Reason, f.Step, f.Layer = se.Reason, se.Step, se.Layer
	}
	if Transient(err) {
		f.Type = FailureTransient
	}
	return f
}

// ErrorType names an error's kind: its gRPC code, else the context error, else its innermost Go type.
func ErrorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return s.Code().String()
	}
	inner := err
	for {
		next := errors.Unwrap(inner)
		if next == nil {
			break
		}
		inner = next
	}
	return fmt.Sprintf("%T", inner)
}

// Transient reports whether err is worth retrying as it is.
func Transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Internal:
		return true
	}
	return false
}
