// Package cloudruntest gives a test the Cloud Run fake (emulator/cloudrunfake) and a client on
// it, dialled as the app dials Cloud Run; both are closed when the test ends.
package cloudruntest

import (
	"context"
	"testing"

	run "cloud.google.com/go/run/apiv2"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
)

// Start starts a fake with opts and dials it with cloudrun.Dial.
func Start(t testing.TB, opts ...cloudrunfake.Option) (*cloudrunfake.Server, *run.ExecutionsClient) {
	t.Helper()
	fake, err := cloudrunfake.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	client, err := cloudrun.Dial(context.Background(), fake.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return fake, client
}
