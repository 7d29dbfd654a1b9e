package auth_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/auth"
	"github.com/stalesweep/stalesweep/internal/auth/authtest"
	"github.com/stalesweep/stalesweep/internal/contract"
)

const (
	url      = "https://stalesweep-start-workflow-123456789.europe-west1.run.app"
	fnURL    = "https://europe-west1-p.cloudfunctions.net/stalesweep-start-workflow"
	oncall   = "oncall@example.com"
	oncallID = "104857600000000000001"
	robot    = "robot@p.iam.gserviceaccount.com"
	robotID  = "113000000000000000042"
	stranger = "someone@example.com"
)

func TestConfigurationsThatCannotBeEnforcedAreRefusedNamingTheSetting(t *testing.T) {
	for name, tc := range map[string]struct {
		c    auth.Config
		want string
	}{
		"off on Cloud Run":          {auth.Config{Mode: auth.ModeOff, OnCloudRun: true}, "K_SERVICE"},
		"no audience":               {auth.Config{Mode: auth.ModeGoogle}, "STALESWEEP_AUTH_AUDIENCE"},
		"default, no audience":      {auth.Config{}, "STALESWEEP_AUTH_AUDIENCE"},
		"unknown mode":              {auth.Config{Mode: "basic", Audiences: []string{url}}, "STALESWEEP_AUTH"},
		"mode in capitals":          {auth.Config{Mode: "OFF"}, "STALESWEEP_AUTH"},
		"the request's Host header": {auth.Config{Audiences: []string{"request"}}, "Host header"},
		"an audience not a URL":     {auth.Config{Audiences: []string{auth.GcloudClientID}}, "not a URL"},
		"a caller not an email nor an id": {auth.Config{Audiences: []string{url}, Allowed: []string{"ops"}},
			"STALESWEEP_ALLOWED_CALLERS"},
	} {
		err := tc.c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want an error naming %q", name, err, tc.want)
		}
		if _, err := auth.New(context.Background(), tc.c); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestOffAcceptsEveryCallerLocally(t *testing.T) {
	v, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeOff})
	if err != nil {
		t.Fatal(err)
	}
	who, err := v.Verify(httptest.NewRequest("POST", "/", nil))
	if err != nil || !v.Disabled() || !strings.Contains(who.String(), "auth off") {
		t.Errorf("caller %q err %v", who, err)
	}
}

// Every token form a documented manual path sends, and the ones that must be refused, through
// the real validator with the test issuer's keys standing in for Google's.
func TestEachManualPathsTokenIsAcceptedOrRefusedWithTheRightCode(t *testing.T) {
	iss, err := authtest.New()
	if err != nil {
		t.Fatal(err)
	}
	newVerifier := func(acceptGcloud bool) *auth.Verifier {
		v, err := auth.New(context.Background(), auth.Config{
			Audiences: []string{url, fnURL + "/"}, AcceptGcloud: acceptGcloud,
			Allowed:    []string{"OnCall@Example.com", robot, robotID},
			HTTPClient: iss.Client(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	expired := iss.Mint(authtest.Claims{"iss": authtest.Google, "aud": url, "sub": oncallID, "email": oncall,
		"email_verified": true, "exp": time.Now().Add(-time.Minute).Unix()})
	tests := []struct {
		name         string
		header       string
		refuseGcloud bool
		want         contract.Code // "" accepted
		caller       string
	}{
		{"gcloud functions call, a user", authtest.Bearer(iss.GcloudUser(oncall, oncallID)), false, "", oncall},
		{"gcloud functions call --impersonate-service-account", authtest.Bearer(iss.GcloudImpersonated(robotID)), false, "", "subject:" + robotID},
		{"print-identity-token, a user", authtest.Bearer(iss.GcloudUser(oncall, oncallID)), false, "", oncall},
		{"print-identity-token, a service account, --audiences=URL --include-email",
			authtest.Bearer(iss.ServiceAccount(robot, "999", url, true)), false, "", robot},
		{"a token for the cloudfunctions.net URL", authtest.Bearer(iss.ServiceAccount(robot, robotID, fnURL, true)), false, "", robot},
		{"the metadata server, format=full", authtest.Bearer(iss.Metadata(robot, "999", url, "full")), false, "", robot},
		{"the metadata server, format=standard", authtest.Bearer(iss.Metadata(robot, robotID, url, "standard")), false, "", "subject:" + robotID},

		{"no Authorization", "", false, contract.CodeUnauthorized, ""},
		{"not a bearer token", "Basic b3BzOnB3", false, contract.CodeUnauthorized, ""},
		{"a bad signature", authtest.Bearer(authtest.Tamper(iss.GcloudUser(oncall, oncallID))), false, contract.CodeUnauthorized, ""},
		{"expired", authtest.Bearer(expired), false, contract.CodeUnauthorized, ""},
		{"another issuer", authtest.Bearer(iss.Mint(authtest.Claims{"iss": "https://evil.example", "aud": url, "sub": oncallID, "email": oncall, "email_verified": true})), false, contract.CodeUnauthorized, ""},
		{"minted for another service", authtest.Bearer(iss.ServiceAccount(robot, robotID, "https://other-123.europe-west1.run.app", true)), false, contract.CodeUnauthorized, ""},
		{"gcloud's token when only the URLs are accepted", authtest.Bearer(iss.GcloudUser(oncall, oncallID)), true, contract.CodeUnauthorized, ""},
		{"an unverified email", authtest.Bearer(iss.Mint(authtest.Claims{"iss": authtest.Google, "aud": url, "sub": oncallID, "email": oncall, "email_verified": false})), false, contract.CodeForbidden, ""},
		{"a user not on the list", authtest.Bearer(iss.GcloudUser(stranger, "1")), false, contract.CodeForbidden, ""},
		{"a service account not on the list, by email", authtest.Bearer(iss.ServiceAccount("x@p.iam.gserviceaccount.com", "7", url, true)), false, contract.CodeForbidden, ""},
		{"a service account not on the list, by id", authtest.Bearer(iss.GcloudImpersonated("7")), false, contract.CodeForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			c, err := newVerifier(!tt.refuseGcloud).Verify(r)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "" && c.String() != tt.caller:
				t.Fatalf("caller %q, want %q", c, tt.caller)
			case tt.want != "" && contract.CodeOf(err) != tt.want:
				t.Fatalf("got %v (code %s), want %s", err, contract.CodeOf(err), tt.want)
			}
		})
	}
}

// A service account's token without its email says what to do about it.
func TestATokenWithoutEmailSaysHowToBeAllowed(t *testing.T) {
	iss, err := authtest.New()
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(context.Background(), auth.Config{Audiences: []string{url}, Allowed: []string{robot}, HTTPClient: iss.Client()})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", authtest.Bearer(iss.ServiceAccount(robot, robotID, url, false)))
	_, err = v.Verify(r)
	if contract.CodeOf(err) != contract.CodeForbidden || !strings.Contains(err.Error(), "--include-email") || !strings.Contains(err.Error(), robotID) {
		t.Errorf("got %v", err)
	}
}
