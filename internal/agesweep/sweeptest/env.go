package sweeptest

import (
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stalesweep/stalesweep/internal/logging"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow"
	"github.com/stalesweep/stalesweep/internal/workflow/runstore"
)

// Env is the setup each sweep's test env embeds: the emulator's Firestore behind a spy, the
// test's clock (Firestore's clock, which the writers stamp and the sweep reads), and the engine
// that runs the sweep.
type Env struct {
	T      *testing.T
	FS     *firestore.Client
	Spy    *fsspy.Spy
	Clock  *testenv.Clock
	Engine *workflow.Engine
}

// NewEnv connects to the emulator through a fresh spy, with the clock at epoch; the engine is
// the sweep's to build (Run).
func NewEnv(t *testing.T, epoch time.Time) Env {
	t.Helper()
	spy := fsspy.New()
	return Env{T: t, FS: testenv.Firestore(t, spy.DialOptions()...), Spy: spy, Clock: testenv.NewClock(epoch)}
}

// Run sets the engine to one running def, its runs recorded in the env's Firestore.
func (e *Env) Run(def workflow.Definition) {
	e.Engine = workflow.NewEngine(workflow.Options{Runs: runstore.New(e.FS), Now: e.Clock.Now, Log: logging.Discard()}, def)
}

// Wrap is store behind wrap, or store itself when wrap is nil.
func Wrap[S any](store S, wrap func(S) S) S {
	if wrap != nil {
		return wrap(store)
	}
	return store
}
