package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

// A Firestore nothing answers for is named when the process builds its dependencies, instead
// of surfacing later as a bare "context deadline exceeded".
func TestAnUnreachableFirestoreIsNamedWhenTheAppIsBuilt(t *testing.T) {
	addr := testenv.FreeAddr(t) // nothing listens there
	t.Setenv(firestoreconn.EmulatorEnv, addr)
	cfg, err := ConfigFromEnv(func(k string) string {
		if k == firestoreconn.EmulatorEnv {
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

// Every workflow that settles on age alone names the bounds New gives the storm guard to, and
// every declared workflow is in Declared once.
func TestEveryAgeBasedWorkflowDeclaresWhereItsStormGuardGoes(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range workflows {
		if w.AgeBased && w.bounds == nil {
			t.Errorf("%s settles on age alone but names no bounds for the storm guard", w.Type)
		}
		if seen[string(w.Type)] {
			t.Errorf("%s is declared twice", w.Type)
		}
		seen[string(w.Type)] = true
	}
	if got := len(Declared()); got != len(workflows) || got == 0 {
		t.Errorf("Declared has %d workflows, the list %d", got, len(workflows))
	}
}
