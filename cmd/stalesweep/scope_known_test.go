package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/internal/testkit/ledgertest"
	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
	"github.com/stalesweep/stalesweep/internal/workflow/pausestore"
)

// pm sweep --queue and pause --scope warn on stderr, and still exit 0, for a queue or scope that
// has no rows and no record; one that has rows, or a record, is not warned about.
func TestAScopeThatNothingKnowsIsWarnedAbout(t *testing.T) {
	fs := commandFirestore(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	tasks := ledgertest.Tasks{Client: fs, Now: testenv.Fixed(old)}
	if err := tasks.Enqueue(ctx, "builds", "a", "slug-a", old); err != nil {
		t.Fatal(err)
	}
	known, unknown := uuid.NewString(), uuid.NewString()
	testenv.Enable(t, fs, known)

	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"pm", "sweep", "--queue", "nosuchqueue", "--dry-run"}, true},
		{[]string{"pm", "sweep", "--queue", "nosuchqueue"}, true},
		{[]string{"pm", "sweep", "--queue", "builds"}, false},
		{[]string{"pause", "pm.sweep", "--scope", "nosuchqueue2", "--reason", "x"}, true},
		{[]string{"pause", "pm.sweep", "--scope", "builds", "--reason", "x"}, false},
		{[]string{"pause", syncType, "--scope", unknown, "--reason", "x"}, true},
		{[]string{"pause", syncType, "--scope", known, "--reason", "x"}, false},
		{[]string{"pause", syncType, "--scope", unknown, "--reason", "again"}, false}, // its pause is a record now
	} {
		code, _, stderr := invoke(t, c.args...)
		scope := c.args[3]
		warned := strings.Contains(stderr, "warning: ") && strings.Contains(stderr, `"`+scope+`"`)
		if code != exitOK || warned != c.warn {
			t.Errorf("stalesweep %s: exit %d, warned %t, want exit 0, warned %t; stderr %q", strings.Join(c.args, " "), code, warned, c.warn, stderr)
		}
	}
	if p, err := pausestore.New(fs).Covering(ctx, "pm.sweep", "nosuchqueue2", time.Now()); err != nil || p == nil {
		t.Errorf("the warned pause was not taken: %v, %v", p, err)
	}
}
