// Package auth decides who may call the HTTP face (StartWorkflow). Cloud Run's IAM has already
// let the request through; the function then checks the Google-signed ID token itself (issuer,
// audience, verified email, allow-list) against settings that come from the deployment, never
// from the request. docs/operations.md lists the checks, their answers, and the token each
// manual path sends.
//
// Authentication can be turned off for local use only: the setting is refused on Cloud Run
// (K_SERVICE set), `stalesweep serve` refuses it on an address that is not loopback, and a
// process that has it off says so when it starts.
package auth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/api/idtoken"
	"google.golang.org/api/option"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// Modes.
const (
	ModeGoogle = "google" // verify Google-signed ID tokens (the default)
	ModeOff    = "off"    // accept every caller as "anonymous"; local use only
)

// GcloudClientID is the OAuth client id of the Google Cloud CLI (googlecloudsdk/core/config.py
// CLOUDSDK_CLIENT_ID): the audience gcloud's own ID tokens carry without --audiences.
const GcloudClientID = "32555940559.apps.googleusercontent.com"

var issuers = []string{"accounts.google.com", "https://accounts.google.com"}

// Config configures the verifier.
type Config struct {
	Mode string // ModeGoogle (default) or ModeOff
	// Audiences are the function's own URLs; required in ModeGoogle.
	Audiences []string
	// AcceptGcloud also accepts tokens whose audience is GcloudClientID.
	AcceptGcloud bool
	// Allowed lists the callers allowed to start runs: emails (against a verified email claim)
	// and numeric unique ids (against the subject, all a token minted without email carries).
	Allowed []string
	// OnCloudRun is true when the process runs on Cloud Run / Cloud Functions (K_SERVICE set).
	OnCloudRun bool
	// HTTPClient fetches Google's signing keys; nil uses the default client.
	HTTPClient *http.Client
}

// Check reports why the configuration cannot be enforced, naming the setting, without a network call.
func (c Config) Check() error {
	switch c.mode() {
	case ModeOff:
		if c.OnCloudRun {
			return fmt.Errorf("STALESWEEP_AUTH=off is for local use only and is refused on Cloud Run (K_SERVICE is set)")
		}
		return nil
	case ModeGoogle:
	default:
		return fmt.Errorf("STALESWEEP_AUTH=%q: want %q or %q", c.Mode, ModeGoogle, ModeOff)
	}
	if len(c.Audiences) == 0 {
		return fmt.Errorf("STALESWEEP_AUTH_AUDIENCE is not set: set it to the function's URLs (comma-separated)")
	}
	for _, a := range c.Audiences {
		if a == "request" {
			return fmt.Errorf("STALESWEEP_AUTH_AUDIENCE=request is no longer accepted: an audience taken from the request's Host header is the caller's to choose; set the function's URLs")
		}
		if !strings.HasPrefix(a, "https://") && !strings.HasPrefix(a, "http://") {
			return fmt.Errorf("STALESWEEP_AUTH_AUDIENCE: %q is not a URL: list the function's URLs (gcloud's own tokens are STALESWEEP_AUTH_ACCEPT_GCLOUD)", a)
		}
	}
	for _, a := range c.Allowed {
		if !strings.Contains(a, "@") && !allDigits(a) {
			return fmt.Errorf("STALESWEEP_ALLOWED_CALLERS: %q is neither an email nor a numeric unique id", a)
		}
	}
	return nil
}

func (c Config) mode() string {
	if c.Mode == "" {
		return ModeGoogle
	}
	return c.Mode
}

// Verifier checks callers.
type Verifier struct {
	mode      string
	audiences []string
	allowed   []string
	validator *idtoken.Validator
}

// New returns a verifier, or an error when the configuration cannot be enforced.
func New(ctx context.Context, c Config) (*Verifier, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if c.mode() == ModeOff {
		return &Verifier{mode: ModeOff}, nil
	}
	audiences := make([]string, 0, len(c.Audiences)+1)
	for _, a := range c.Audiences {
		audiences = append(audiences, strings.TrimSuffix(a, "/"))
	}
	if c.AcceptGcloud {
		audiences = append(audiences, GcloudClientID)
	}
	var opts []idtoken.ClientOption
	if c.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(c.HTTPClient))
	}
	v, err := idtoken.NewValidator(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	allowed := make([]string, 0, len(c.Allowed))
	for _, a := range c.Allowed {
		allowed = append(allowed, strings.ToLower(a))
	}
	return &Verifier{mode: ModeGoogle, audiences: audiences, allowed: allowed, validator: v}, nil
}

// Disabled reports whether authentication is off.
func (v *Verifier) Disabled() bool { return v.mode == ModeOff }

// Caller is a verified caller.
type Caller struct {
	Email   string // the verified email, when the token carries one
	Subject string // the token's subject: the account's unique id
}

// String names the caller for a run record: the email, else the subject.
func (c Caller) String() string {
	if c.Email != "" {
		return c.Email
	}
	return "subject:" + c.Subject
}

// Verify returns the request's verified caller, or a *contract.Error (unauthorized or forbidden).
func (v *Verifier) Verify(r *http.Request) (Caller, error) {
	if v.Disabled() {
		return Caller{Email: "anonymous (auth off)"}, nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Caller{}, contract.Errorf(contract.CodeUnauthorized, "an Authorization: Bearer ID token is required")
	}
	// The library checks the signature and expiry; the audience is checked here against the
	// list (it checks one audience only, and none when given "").
	p, err := v.validator.Validate(r.Context(), token, "")
	if err != nil {
		return Caller{}, &contract.Error{Code: contract.CodeUnauthorized, Message: "the ID token is not valid: not signed by Google, or expired", Err: err}
	}
	if !slices.Contains(issuers, p.Issuer) {
		return Caller{}, contract.Errorf(contract.CodeUnauthorized, "the ID token was not issued by Google (iss %q)", p.Issuer)
	}
	if !slices.Contains(v.audiences, strings.TrimSuffix(p.Audience, "/")) {
		return Caller{}, contract.Errorf(contract.CodeUnauthorized, "the ID token was minted for %q, not for this service", p.Audience)
	}
	c := Caller{Subject: p.Subject}
	if email, _ := p.Claims["email"].(string); email != "" {
		if verified, _ := p.Claims["email_verified"].(bool); !verified {
			return Caller{}, contract.Errorf(contract.CodeForbidden, "the ID token's email %s is not verified", email)
		}
		c.Email = strings.ToLower(email)
	}
	if (c.Email != "" && slices.Contains(v.allowed, c.Email)) || (c.Subject != "" && slices.Contains(v.allowed, c.Subject)) {
		return c, nil
	}
	if c.Email == "" {
		return Caller{}, contract.Errorf(contract.CodeForbidden,
			"the ID token carries no email and its subject %s is not on STALESWEEP_ALLOWED_CALLERS: a service account's token minted without --include-email (or format=full on the metadata server) names the account by its unique id only", c.Subject)
	}
	return Caller{}, contract.Errorf(contract.CodeForbidden, "%s may not start workflows here", c.Email)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
