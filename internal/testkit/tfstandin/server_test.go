package tfstandin

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestEverySchemaServes(t *testing.T) {
	for _, name := range Names() {
		p, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Version == "" || p.Source == "" || len(p.Resources)+len(p.DataSources) == 0 {
			t.Errorf("%s: version %q source %q, %d resources %d data sources", name, p.Version, p.Source, len(p.Resources), len(p.DataSources))
		}
		if _, err := NewServer(p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Load("aws"); err == nil {
		t.Error("a provider without a schema loaded")
	}
}

// A create is planned as proposed, with every computed attribute left null unknown, in nested
// blocks too; what the configuration set stays as it is.
func TestAPlannedCreateLeavesComputedAttributesUnknown(t *testing.T) {
	s := googleServer(t)
	typ := s.schemas.ResourceSchemas["google_service_account"].ValueType().(tftypes.Object)
	proposed := nulls(t, typ, map[string]tftypes.Value{"account_id": tftypes.NewValue(tftypes.String, "runtime")})
	resp, err := s.PlanResourceChange(context.Background(), &tfprotov5.PlanResourceChangeRequest{TypeName: "google_service_account", ProposedNewState: proposed})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("plan: %v %v", err, resp.Diagnostics)
	}
	got := attributes(t, resp.PlannedState, typ)
	var account string
	if err := got["account_id"].As(&account); err != nil || account != "runtime" {
		t.Errorf("account_id planned %v, want the configured runtime", got["account_id"])
	}
	for _, name := range []string{"email", "unique_id", "name", "member", "id"} {
		if got[name].IsKnown() {
			t.Errorf("computed %s planned known (%v)", name, got[name])
		}
	}
	if !got["display_name"].IsNull() {
		t.Errorf("optional display_name planned %v, want null as configured", got["display_name"])
	}
}

// A data source answers with plausible values for what it computes, and keeps its arguments.
func TestADataSourceAnswersPlausibleValues(t *testing.T) {
	s := googleServer(t)
	typ := s.schemas.DataSourceSchemas["google_project"].ValueType().(tftypes.Object)
	cfg := nulls(t, typ, map[string]tftypes.Value{"project_id": tftypes.NewValue(tftypes.String, "demo")})
	resp, err := s.ReadDataSource(context.Background(), &tfprotov5.ReadDataSourceRequest{TypeName: "google_project", Config: cfg})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("read: %v %v", err, resp.Diagnostics)
	}
	got := attributes(t, resp.State, typ)
	var number, project string
	_ = got["number"].As(&number)
	_ = got["project_id"].As(&project)
	if number != PlausibleString("number") || project != "demo" {
		t.Errorf("number %q project_id %q", number, project)
	}
}

func googleServer(t *testing.T) *Server {
	t.Helper()
	p, err := Load("google")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nulls is an object of typ whose attributes are null but for set.
func nulls(t *testing.T, typ tftypes.Object, set map[string]tftypes.Value) *tfprotov5.DynamicValue {
	t.Helper()
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	for name, v := range set {
		vals[name] = v
	}
	dv, err := tfprotov5.NewDynamicValue(typ, tftypes.NewValue(typ, vals))
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// attributes reads a state of typ back as its attributes.
func attributes(t *testing.T, dv *tfprotov5.DynamicValue, typ tftypes.Object) map[string]tftypes.Value {
	t.Helper()
	v, err := dv.Unmarshal(typ)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]tftypes.Value
	if err := v.As(&got); err != nil {
		t.Fatal(err)
	}
	return got
}
