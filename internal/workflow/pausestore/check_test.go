package pausestore

import (
	"strings"
	"testing"
	"time"
)

func TestPauseCheckNamesTheField(t *testing.T) {
	t.Parallel()
	ok := Pause{WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: checkT0}
	for field, p := range map[string]Pause{
		"workflow_type": {PausedBy: "x", PausedAt: checkT0},
		"paused_by":     {WorkflowType: "pm.sweep", PausedAt: checkT0},
		"until":         {WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: checkT0, Until: checkT0},
		"scope":         {WorkflowType: "pm.sweep", PausedBy: "x", PausedAt: checkT0, Scope: "org/"},
	} {
		err := check(p)
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s: check = %v, want an error naming %s", field, err, field)
		}
	}
	if err := check(ok); err != nil {
		t.Error(err)
	}
}

// checkT0 is any time: check compares a pause's times with each other only.
var checkT0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
