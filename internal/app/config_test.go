package app

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		EnvProject: "p", EnvSyncConcurrency: "16", EnvLostGrace: "30m", EnvRunBudget: "90s", EnvExecutorTimeout: "5s", EnvPlatformTimeout: "60",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Project != "p" || c.Sync.Concurrency != 16 || c.Sync.LostGrace != 30*time.Minute || c.CloudRun.CallTimeout != 5*time.Second {
		t.Errorf("config = %+v", c)
	}
	if got := c.budget(); got != 48*time.Second {
		t.Errorf("budget = %s, want 80%% of the 60 s platform timeout", got)
	}
}

func TestConfigDefaultsAndEmulatorProject(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{"FIRESTORE_EMULATOR_HOST": "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Project != EmulatorProjectLocal || c.budget() != 4*time.Minute {
		t.Errorf("project %q budget %s", c.Project, c.budget())
	}
}

func TestConfigRejectsMalformedValuesNamingTheVariable(t *testing.T) {
	for name, v := range map[string]string{EnvSyncConcurrency: "0", EnvLostGrace: "soon", EnvRunBudget: "-1s", EnvPlatformTimeout: "x",
		EnvStormFraction: "1.5", EnvStormMinRows: "0", EnvLogLevel: "bogus", EnvAuth: "OFF", EnvAuthAcceptGcloud: "yes", EnvPMTTLFloor: "0",
		EnvBlindFraction: "1", EnvBlindMinRows: "0", EnvBlindWindow: "soon", EnvRosterMaxAge: "7h",
		EnvFirestoreTimeout: "soon"} {
		_, err := ConfigFromEnv(env(map[string]string{name: v}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: err = %v, want one naming the variable", name, v, err)
		}
	}
}

func TestTheStormGuardIsReadFromTheEnvironment(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{EnvStormFraction: "0.25", EnvStormMinRows: "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Storm; g.Fraction != 0.25 || g.MinRows != 3 {
		t.Errorf("storm guard: %+v", g)
	}
	for _, bad := range []string{"0", "-0.5", "x", "NaN"} {
		if _, err := ConfigFromEnv(env(map[string]string{EnvStormFraction: bad})); err == nil {
			t.Errorf("%s=%s accepted", EnvStormFraction, bad)
		}
	}
}

func TestAuthenticationOffIsRefusedOnCloudRun(t *testing.T) {
	_, err := ConfigFromEnv(env(map[string]string{EnvAuth: "off", EnvCloudRunService: "stalesweep-start-workflow"}))
	if err == nil || !strings.Contains(err.Error(), EnvCloudRunService) {
		t.Errorf("err = %v, want one naming %s", err, EnvCloudRunService)
	}
}

func TestStartWorkflowsAuthenticationIsReadFromTheEnvironment(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		EnvAuthAudience: "https://a-1.europe-west1.run.app, https://europe-west1-p.cloudfunctions.net/a", EnvAllowedCallers: "ops@example.com,113",
		EnvPMTTLFloor: "120",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Auth.Audiences) != 2 || !c.Auth.AcceptGcloud || len(c.Auth.Allowed) != 2 || c.PMSweep.TTLFloor != 120 {
		t.Errorf("config = %+v", c)
	}
	if err := c.Check(true); err != nil {
		t.Errorf("Check: %v", err)
	}
	c, _ = ConfigFromEnv(env(map[string]string{EnvAuthAudience: "https://a-1.europe-west1.run.app", EnvAuthAcceptGcloud: "false"}))
	if c.Auth.AcceptGcloud {
		t.Error("gcloud's own tokens accepted with " + EnvAuthAcceptGcloud + "=false")
	}
	if c, _ := ConfigFromEnv(env(nil)); c.Check(true) == nil || c.Check(false) != nil {
		t.Error("without an audience, Check must refuse only a process that serves StartWorkflow")
	}
}

func TestTheRostersAgeIsReadFromTheEnvironment(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "5m": 5 * time.Minute, "6h": 6 * time.Hour, "off": -1} {
		c, err := ConfigFromEnv(env(map[string]string{EnvRosterMaxAge: v}))
		if err != nil || c.RosterMaxAge != want {
			t.Errorf("%s=%q: %s, %v; want %s", EnvRosterMaxAge, v, c.RosterMaxAge, err, want)
		}
	}
	for _, bad := range []string{"0", "-1m", "6h1s", "never", "OFF"} {
		if _, err := ConfigFromEnv(env(map[string]string{EnvRosterMaxAge: bad})); err == nil || !strings.Contains(err.Error(), EnvRosterMaxAge) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", EnvRosterMaxAge, bad, err)
		}
	}
}

func TestTheFirestoreTimeoutDefaultsToTenSecondsAndIsBounded(t *testing.T) {
	c, err := ConfigFromEnv(env(nil))
	if err != nil || c.FirestoreTimeout != FirestoreTimeoutDefault || FirestoreTimeoutDefault != 10*time.Second {
		t.Errorf("default: %s, %v; want 10s", c.FirestoreTimeout, err)
	}
	if c, err := ConfigFromEnv(env(map[string]string{EnvFirestoreTimeout: "2s"})); err != nil || c.FirestoreTimeout != 2*time.Second {
		t.Errorf("2s: %s, %v", c.FirestoreTimeout, err)
	}
	for _, bad := range []string{"soon", "0s", "-1s", "999ms", "5m1s", "10"} {
		_, err := ConfigFromEnv(env(map[string]string{EnvFirestoreTimeout: bad}))
		if err == nil || !strings.Contains(err.Error(), EnvFirestoreTimeout) || !strings.Contains(err.Error(), "from 1s to 5m0s") {
			t.Errorf("%s=%s: err = %v, want one naming the variable and its bounds", EnvFirestoreTimeout, bad, err)
		}
	}
}

// Every setting is named once and documented, so the README's table (generated from the list)
// has one row per variable a process reads.
func TestEverySettingIsNamedOnceAndDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings {
		if seen[s.Name] || s.Default == "" || s.Values == "" || s.Doc == "" || s.read == nil {
			t.Errorf("setting %+v: named twice or missing a default, values, doc line or reader", s)
		}
		seen[s.Name] = true
	}
}
