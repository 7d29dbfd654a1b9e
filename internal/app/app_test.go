package app

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/logging"
)

// A Firestore nothing answers for is named when the process builds its dependencies, instead
// of surfacing later as a bare "context deadline exceeded".
func TestAnUnreachableFirestoreIsNamedWhenTheAppIsBuilt(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	t.Setenv(ledger.EmulatorEnv, addr)
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == ledger.EmulatorEnv {
			return addr
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = New(ctx, cfg, logging.Discard(), time.Now, Parts{})
	if err == nil || !strings.Contains(err.Error(), "Firestore at "+addr+" unreachable") {
		t.Errorf("New = %v, want Firestore at %s unreachable", err, addr)
	}
}
