package contract

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Code is an error code of the HTTP and command faces, as the seeds list them.
type Code string

// The error codes and, through HTTPStatus, their statuses.
const (
	CodeValidationFailed Code = "validation_failed"
	CodeUnauthorized     Code = "unauthorized"
	CodeForbidden        Code = "forbidden"
	CodeConflict         Code = "conflict"
	CodeInternal         Code = "internal"
)

// HTTPStatus is the status a response with this code carries.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeValidationFailed:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeConflict:
		return http.StatusConflict
	default:
		return http.StatusInternalServerError
	}
}

// Error is an error with a code, a message safe to show the caller, and optional details.
type Error struct {
	Code    Code
	Message string
	Details any
	Err     error // the cause, for logs; never shown to a caller
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code an error carries: CodeValidationFailed for a *ValidationError, an *Error's, else CodeInternal.
func CodeOf(err error) Code {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return CodeValidationFailed
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return CodeInternal
}

// Violation is one broken rule of one input field.
type Violation struct {
	Field   string `json:"field"`   // dotted path of the field, e.g. "limit"
	Rule    string `json:"rule"`    // the JSON Schema keyword broken, e.g. "maximum"
	Message string `json:"message"` // what was wrong, in words
}

// ValidationError is an input that broke its contract. It lists every violation found.
type ValidationError struct {
	Violations []Violation
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = fmt.Sprintf("%s: %s (%s)", v.Field, v.Message, v.Rule)
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Invalid builds a *ValidationError with one violation.
func Invalid(field, rule, format string, args ...any) *ValidationError {
	return &ValidationError{Violations: []Violation{{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)}}}
}
