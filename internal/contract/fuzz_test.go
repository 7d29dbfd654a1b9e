package contract_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stalesweep/stalesweep/internal/contract"
)

// FuzzValidate holds Validate to its contract for every workflow type this build implements:
// whatever initial_data arrives (from a request, a tick, or the command line), no panic; a
// rejection is a *ValidationError whose every violation names a field and a rule; and what is
// accepted is a JSON object in canonical form — validating it again accepts it and returns the
// very same bytes, so a run recorded from it reads back as it was started.
func FuzzValidate(f *testing.F) {
	const group = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	for _, s := range []string{
		// runner.execution-sync-stale-cloud-run and -kubernetes
		`{"organization_uuid": "` + org + `"}`,
		`{"organization_uuid": "` + org + `", "limit": 200, "min_age_seconds": 31536000}`,
		`{"organization_uuid": "` + org + `", "limit": 2.0, "min_age_seconds": 1e2}`,
		`{"organization_uuid": "` + org + `", "limit": 201}`,
		`{"organization_uuid": "` + org + `", "limit": 2.5}`,
		`{"organization_uuid": "` + org + `", "limit": 1e400}`,
		`{"organization_uuid": "` + org + `", "limit": -0}`,
		`{"organization_uuid": "ACME"}`,
		`{"organization_uuid": "` + org + `", "limt": 5}`,
		// runner.workspace-lease-settle
		`{"organization_uuid": "` + org + `", "runner_group_uuid": "` + group + `", "max_settlements": 500}`,
		`{"organization_uuid": "` + org + `", "runner_group_uuid": "` + group + `", "max_settlements": 0}`,
		`{"organization_uuid": "` + org + `"}`,
		// platform.extension.runs.sweep
		`{"older_than_ms": 60000, "limit": 1000}`,
		`{"older_than_ms": 9007199254740991}`,
		`{"older_than_ms": 9007199254740992}`,
		`{"older_than_ms": 0}`,
		// pm.sweep
		`{"queue": "default", "ttl": 300, "reclaimer": "ops", "dry_run": true}`,
		`{"queue": "-bad", "ttl": 0, "reclaimer": "", "dry_run": "yes"}`,
		`{"queue": "` + string(bytes.Repeat([]byte("q"), 129)) + `"}`,
		// any type
		``, `null`, `{}`, `[]`, `"x"`, `{} {}`, `{"organization_uuid":`, `{"a": {"": {}}}`,
	} {
		f.Add([]byte(s))
	}
	types := contract.Seeded()
	if len(types) == 0 {
		f.Fatal("this build implements no workflow type")
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, typ := range types {
			out, err := contract.Validate(typ, raw)
			if err != nil {
				var ve *contract.ValidationError
				if !errors.As(err, &ve) || len(ve.Violations) == 0 {
					t.Fatalf("%s: rejected %q with %T %v, want a *ValidationError with violations", typ, raw, err, err)
				}
				for _, v := range ve.Violations {
					if v.Field == "" || v.Rule == "" {
						t.Fatalf("%s: rejected %q with violation %+v, which does not name a field and a rule", typ, raw, v)
					}
				}
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
				t.Fatalf("%s: accepted %q as %s, not a JSON object", typ, raw, out)
			}
			again, err := contract.Validate(typ, out)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%s: accepted %q as %s, which validates again as %s, %v", typ, raw, out, again, err)
			}
		}
	})
}
