// Package auth decides who may call the HTTP face. When deployed, a caller presents a
// Google-signed ID token in Authorization (gcloud auth print-identity-token, or a service
// account's token minted for the function's URL); the token's signature, audience, issuer and
// expiry are verified, and its verified email must be on the allow-list.
//
//	no or malformed Authorization, bad signature, wrong audience or issuer, expired → 401
//	a valid token whose email is not verified or not on the allow-list               → 403
//
// Authentication can be turned off for local use only: the setting is refused on Cloud Run
// (K_SERVICE set), and a process that has it off says so when it starts.
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

// Google's ID token issuers.
var issuers = []string{"accounts.google.com", "https://accounts.google.com"}

// Config configures the verifier.
type Config struct {
	Mode string // ModeGoogle (default) or ModeOff
	// Audience lists, comma-separated, the audiences a token may carry: the function's URLs,
	// or "request" for the URL the request was made to (https://HOST), which is what Cloud Run
	// itself checks the token against before the request reaches the function. Required in
	// ModeGoogle.
	Audience string
	Allowed  []string // caller emails allowed to start runs
	// OnCloudRun is true when the process runs on Cloud Run / Cloud Functions (K_SERVICE set).
	OnCloudRun bool
	// HTTPClient fetches Google's signing keys; nil uses the default client.
	HTTPClient *http.Client
}

// Verifier checks callers.
type Verifier struct {
	mode      string
	audiences []string
	allowed   []string
	validator *idtoken.Validator
}

// AudienceRequest is the audience meaning "the URL this request was made to".
const AudienceRequest = "request"

// New returns a verifier, or an error when the configuration cannot be enforced.
func New(ctx context.Context, c Config) (*Verifier, error) {
	mode := c.Mode
	if mode == "" {
		mode = ModeGoogle
	}
	switch mode {
	case ModeOff:
		if c.OnCloudRun {
			return nil, fmt.Errorf("auth: STALESWEEP_AUTH=off is for local use only and is refused on Cloud Run")
		}
		return &Verifier{mode: ModeOff}, nil
	case ModeGoogle:
	default:
		return nil, fmt.Errorf("auth: mode %q: want %q or %q", mode, ModeGoogle, ModeOff)
	}
	var audiences []string
	for _, a := range strings.Split(c.Audience, ",") {
		if a = strings.TrimSpace(a); a != "" {
			audiences = append(audiences, a)
		}
	}
	if len(audiences) == 0 {
		return nil, fmt.Errorf("auth: no audience: set STALESWEEP_AUTH_AUDIENCE to the function's URL (or %q)", AudienceRequest)
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
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			allowed = append(allowed, a)
		}
	}
	return &Verifier{mode: mode, audiences: audiences, allowed: allowed, validator: v}, nil
}

// expected lists the audiences a token for r may carry.
func (v *Verifier) expected(r *http.Request) []string {
	out := make([]string, 0, len(v.audiences))
	for _, a := range v.audiences {
		if a == AudienceRequest {
			a = "https://" + r.Host
		}
		out = append(out, strings.TrimSuffix(a, "/"))
	}
	return out
}

// Disabled reports whether authentication is off.
func (v *Verifier) Disabled() bool { return v.mode == ModeOff }

// Caller returns the verified email of the request's caller, or a *contract.Error with code
// unauthorized or forbidden.
func (v *Verifier) Caller(r *http.Request) (string, error) {
	if v.Disabled() {
		return "anonymous (auth off)", nil
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", contract.Errorf(contract.CodeUnauthorized, "an Authorization: Bearer ID token is required")
	}
	// The library checks the signature and expiry; the audience is checked here against the
	// list (it checks one audience only, and none when given "").
	p, err := v.validator.Validate(r.Context(), token, "")
	if err != nil {
		return "", &contract.Error{Code: contract.CodeUnauthorized, Message: "the ID token is not valid for this service", Err: err}
	}
	if !slices.Contains(v.expected(r), strings.TrimSuffix(p.Audience, "/")) {
		return "", contract.Errorf(contract.CodeUnauthorized, "the ID token was not minted for this service")
	}
	if !slices.Contains(issuers, p.Issuer) {
		return "", contract.Errorf(contract.CodeUnauthorized, "the ID token was not issued by Google")
	}
	email, _ := p.Claims["email"].(string)
	verified, _ := p.Claims["email_verified"].(bool)
	if email == "" || !verified {
		return "", contract.Errorf(contract.CodeForbidden, "the ID token carries no verified email")
	}
	email = strings.ToLower(email)
	if !slices.Contains(v.allowed, email) {
		return "", contract.Errorf(contract.CodeForbidden, "%s may not start workflows here", email)
	}
	return email, nil
}
