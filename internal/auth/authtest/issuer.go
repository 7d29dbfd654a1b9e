// Package authtest is a local ID token issuer for tests: its own RSA key, served as Google's
// signing keys through an *http.Client handed to auth.Config.HTTPClient, so the real validator
// (google.golang.org/api/idtoken) checks tokens minted here exactly as it checks Google's. No
// production code path can reach it: only a test hands its client to the verifier.
//
// The token forms mirror what each documented manual path sends, as gcloud 528 mints them
// (googlecloudsdk/core/credentials/store.py, command_lib/functions/v2/call/command.py) and as
// the metadata server and IAM Credentials' generateIdToken shape them.
package authtest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/stalesweep/stalesweep/internal/auth"
)

// Issuer mints ID tokens with its own key.
type Issuer struct {
	key   *rsa.PrivateKey
	keyID string
	now   func() time.Time
}

// New returns an issuer with a fresh 2048-bit key.
func New() (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("authtest: %w", err)
	}
	return &Issuer{key: key, keyID: "authtest-key", now: time.Now}, nil
}

// Client answers every request with the issuer's public key as a JWK set: hand it to
// auth.Config.HTTPClient, and the validator fetches it in place of Google's certificates.
func (i *Issuer) Client() *http.Client {
	return &http.Client{Transport: keysTransport{i.jwks()}}
}

func (i *Issuer) jwks() []byte {
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": i.keyID,
		"n": b64(i.key.N.Bytes()), "e": b64(big.NewInt(int64(i.key.E)).Bytes()),
	}}})
	return b
}

type keysTransport struct{ body []byte }

func (t keysTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"public, max-age=3600"}},
		Body:    io.NopCloser(bytes.NewReader(t.body)),
		Request: req,
	}, nil
}

// Claims are a token's claims.
type Claims map[string]any

// Mint signs claims with the issuer's key (RS256). exp and iat are filled in when absent.
func (i *Issuer) Mint(c Claims) string {
	now := i.now()
	if _, ok := c["iat"]; !ok {
		c["iat"] = now.Unix()
	}
	if _, ok := c["exp"]; !ok {
		c["exp"] = now.Add(time.Hour).Unix()
	}
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": i.keyID})
	payload, _ := json.Marshal(c)
	signed := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, i.key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err) // a valid key always signs
	}
	return signed + "." + b64(sig)
}

// Google is the issuer Google's ID tokens carry.
const Google = "https://accounts.google.com"

// GcloudUser is the token `gcloud functions call --gen2` and `gcloud auth print-identity-token`
// send for a user account: gcloud's own, its audience gcloud's OAuth client id.
func (i *Issuer) GcloudUser(email, subject string) string {
	return i.Mint(Claims{"iss": Google, "aud": auth.GcloudClientID, "azp": auth.GcloudClientID,
		"sub": subject, "email": email, "email_verified": true, "at_hash": "x"})
}

// GcloudImpersonated is the token `gcloud functions call --gen2
// --impersonate-service-account=SA` sends: generateIdToken for gcloud's client id without
// includeEmail, so the account appears only as its unique id.
func (i *Issuer) GcloudImpersonated(uniqueID string) string {
	return i.Mint(Claims{"iss": Google, "aud": auth.GcloudClientID, "azp": uniqueID, "sub": uniqueID})
}

// ServiceAccount is the token `gcloud auth print-identity-token --impersonate-service-account=SA
// --audiences=AUD [--include-email]` prints.
func (i *Issuer) ServiceAccount(email, uniqueID, audience string, includeEmail bool) string {
	c := Claims{"iss": Google, "aud": audience, "azp": uniqueID, "sub": uniqueID}
	if includeEmail {
		c["email"], c["email_verified"] = email, true
	}
	return i.Mint(c)
}

// Metadata is the token a workload on Google Cloud gets from the metadata server
// (instance/service-accounts/default/identity?audience=AUD&format=FORMAT): with format=full it
// names the account by email; with the standard format by its unique id only.
func (i *Issuer) Metadata(email, uniqueID, audience, format string) string {
	c := Claims{"iss": Google, "aud": audience, "azp": uniqueID, "sub": uniqueID}
	if format == "full" {
		c["email"], c["email_verified"] = email, true
		c["google"] = map[string]any{"compute_engine": map[string]any{"project_id": "p", "zone": "europe-west1-b"}}
	}
	return i.Mint(c)
}

// Bearer is an Authorization header value.
func Bearer(token string) string { return "Bearer " + token }

// Tamper returns token with one character of its signature changed.
func Tamper(token string) string {
	cut := strings.LastIndexByte(token, '.') + 1
	sig := []byte(token[cut:])
	if sig[0] == 'A' {
		sig[0] = 'B'
	} else {
		sig[0] = 'A'
	}
	return token[:cut] + string(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
