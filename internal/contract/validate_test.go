package contract_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stalesweep/stalesweep/internal/contract"
	"github.com/stalesweep/stalesweep/internal/executionsync"
)

const org = "0f8fad5b-d9cb-469f-a165-70867728950e"

func TestExecutionSyncInputRejections(t *testing.T) {
	tests := []struct {
		name, input, field, rule string
	}{
		{"missing organization_uuid", `{}`, "organization_uuid", "required"},
		{"organization_uuid not a uuid", `{"organization_uuid": "acme"}`, "organization_uuid", "format"},
		{"organization_uuid not a string", `{"organization_uuid": 7}`, "organization_uuid", "type"},
		{"limit 0", `{"organization_uuid": "` + org + `", "limit": 0}`, "limit", "minimum"},
		{"limit 201", `{"organization_uuid": "` + org + `", "limit": 201}`, "limit", "maximum"},
		{"limit as a word", `{"organization_uuid": "` + org + `", "limit": "ten"}`, "limit", "type"},
		{"limit as a fraction", `{"organization_uuid": "` + org + `", "limit": 2.5}`, "limit", "type"},
		{"negative min_age_seconds", `{"organization_uuid": "` + org + `", "min_age_seconds": -1}`, "min_age_seconds", "minimum"},
		{"min_age_seconds over a year", `{"organization_uuid": "` + org + `", "min_age_seconds": 31536001}`, "min_age_seconds", "maximum"},
		{"unknown field", `{"organization_uuid": "` + org + `", "limt": 5}`, "limt", "additionalProperties"},
		{"field with an empty name", `{"organization_uuid": "` + org + `", "": 5}`, "initial_data", "additionalProperties"},
		{"not an object", `[1, 2]`, "initial_data", "type"},
		{"not JSON", `{"organization_uuid":`, "initial_data", "type"},
		{"two values", `{} {}`, "initial_data", "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := contract.Validate(contract.ExecutionSyncCloudRun, []byte(tt.input))
			var ve *contract.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			for _, v := range ve.Violations {
				if v.Field == tt.field && v.Rule == tt.rule {
					if !strings.Contains(err.Error(), tt.field) {
						t.Errorf("message %q does not name the field", err)
					}
					return
				}
			}
			t.Errorf("violations %+v do not include %s/%s", ve.Violations, tt.field, tt.rule)
		})
	}
}

func TestRangeViolationsPrintPlainNumbers(t *testing.T) {
	for _, tt := range []struct{ input, want string }{
		{`{"organization_uuid": "` + org + `", "min_age_seconds": 31536001}`, "maximum: got 31536001, want 31536000"},
		{`{"organization_uuid": "` + org + `", "min_age_seconds": -1}`, "minimum: got -1, want 0"},
		{`{"organization_uuid": "` + org + `", "limit": 201}`, "maximum: got 201, want 200"},
	} {
		_, err := contract.Validate(contract.ExecutionSyncCloudRun, []byte(tt.input))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%s) = %v, want a message with %q", tt.input, err, tt.want)
		}
	}
}

func TestValidateReportsEveryViolation(t *testing.T) {
	_, err := contract.Validate(contract.ExecutionSyncCloudRun, []byte(`{"limit": 0, "extra": true}`))
	var ve *contract.ValidationError
	if !errors.As(err, &ve) || len(ve.Violations) != 3 {
		t.Fatalf("err = %v, want 3 violations (organization_uuid, limit, extra)", err)
	}
}

func TestValidateAppliesTheSeedDefaults(t *testing.T) {
	for _, raw := range []string{`{"organization_uuid": "` + org + `"}`} {
		out, err := contract.Validate(contract.ExecutionSyncCloudRun, []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		var in executionsync.Input
		if err := json.Unmarshal(out, &in); err != nil {
			t.Fatal(err)
		}
		if in.Limit != executionsync.LimitDefault || in.MinAgeSeconds != executionsync.MinAgeSecondsDefault || in.OrganizationUUID != org {
			t.Errorf("defaults applied = %+v, want limit %d, min_age_seconds %d", in, executionsync.LimitDefault, executionsync.MinAgeSecondsDefault)
		}
	}
}

func TestValidateKeepsGivenValuesAndCanonicalizesIntegers(t *testing.T) {
	out, err := contract.Validate(contract.ExecutionSyncCloudRun, []byte(`{"organization_uuid": "`+org+`", "limit": 2.0, "min_age_seconds": 1e2}`))
	if err != nil {
		t.Fatal(err)
	}
	var in executionsync.Input
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("canonical output %s does not decode: %v", out, err)
	}
	if in.Limit != 2 || in.MinAgeSeconds != 100 {
		t.Errorf("got %+v from %s", in, out)
	}
}

func TestSchemaBoundsMatchTheWorkflowConstants(t *testing.T) {
	raw, err := contract.Schema(contract.ExecutionSyncCloudRun)
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Properties map[string]struct {
			Default *int64 `json:"default"`
			Minimum *int64 `json:"minimum"`
			Maximum *int64 `json:"maximum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	limit, age := sch.Properties["limit"], sch.Properties["min_age_seconds"]
	if *limit.Default != executionsync.LimitDefault || *limit.Maximum != executionsync.LimitMax || *limit.Minimum != 1 {
		t.Errorf("limit schema %+v disagrees with the seed (default 25, 1..200)", limit)
	}
	if *age.Default != executionsync.MinAgeSecondsDefault || *age.Minimum != 0 {
		t.Errorf("min_age_seconds schema %+v disagrees with the seed (default 60, >= 0)", age)
	}
	if len(sch.Required) != 1 || sch.Required[0] != "organization_uuid" {
		t.Errorf("required = %v, want [organization_uuid]", sch.Required)
	}
}

// The seed lists the input fields; the schema must have exactly those.
func TestSchemaFieldsAreTheSeedInputFields(t *testing.T) {
	seed, err := os.ReadFile("testdata/seeds/003_eca0697e95c909d8.txt")
	if err != nil {
		t.Fatal(err)
	}
	in := seedTable(t, string(seed), "Input Schema", "Output Schema")
	raw, _ := contract.Schema(contract.ExecutionSyncCloudRun)
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(raw, &sch)
	if len(sch.Properties) != len(in) {
		t.Errorf("schema has %d properties, seed lists %d: %v", len(sch.Properties), len(in), in)
	}
	for _, f := range in {
		if _, ok := sch.Properties[f]; !ok {
			t.Errorf("seed input field %s is missing from the schema", f)
		}
	}
}

// seedTable returns the first column of the table between two headings of a seed document.
func seedTable(t *testing.T, doc, from, to string) []string {
	t.Helper()
	start := strings.Index(doc, from)
	end := strings.Index(doc, to)
	if start < 0 || end < start {
		t.Fatalf("seed has no %q section", from)
	}
	var fields []string
	for _, line := range strings.Split(doc[start:end], "\n") {
		name, _, ok := strings.Cut(line, " |")
		if !ok || strings.HasPrefix(line, "|") || name == "" {
			continue
		}
		fields = append(fields, strings.TrimSpace(name))
	}
	return fields
}

func TestUnknownWorkflowType(t *testing.T) {
	_, err := contract.Validate("runner.nope", []byte(`{}`))
	var ve *contract.ValidationError
	if !errors.As(err, &ve) || ve.Violations[0].Field != "workflow_type" {
		t.Fatalf("err = %v, want a violation of workflow_type", err)
	}
}

func TestCodes(t *testing.T) {
	for code, status := range map[contract.Code]int{
		contract.CodeValidationFailed: 400, contract.CodeUnauthorized: 401, contract.CodeForbidden: 403,
		contract.CodeConflict: 409, contract.CodeInternal: 500,
	} {
		if got := code.HTTPStatus(); got != status {
			t.Errorf("%s → %d, want %d", code, got, status)
		}
	}
	if got := contract.CodeOf(contract.Invalid("f", "r", "m")); got != contract.CodeValidationFailed {
		t.Errorf("CodeOf(validation) = %s", got)
	}
	if got := contract.CodeOf(contract.Errorf(contract.CodeConflict, "busy")); got != contract.CodeConflict {
		t.Errorf("CodeOf(conflict) = %s", got)
	}
	if got := contract.CodeOf(errors.New("boom")); got != contract.CodeInternal {
		t.Errorf("CodeOf(plain) = %s", got)
	}
}
