package tfstandin

import (
	"context"
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// Server serves one provider's schema over Terraform's plugin protocol (version 5, as the
// google provider does).
type Server struct {
	p       *Provider
	schemas *tfprotov5.GetProviderSchemaResponse
}

// NewServer returns the stand-in server of p.
func NewServer(p *Provider) (*Server, error) {
	resp := &tfprotov5.GetProviderSchemaResponse{
		ServerCapabilities: &tfprotov5.ServerCapabilities{GetProviderSchemaOptional: false, PlanDestroy: true},
		ResourceSchemas:    map[string]*tfprotov5.Schema{},
		DataSourceSchemas:  map[string]*tfprotov5.Schema{},
		Functions:          map[string]*tfprotov5.Function{},
	}
	var err error
	if resp.Provider, err = p.Provider.proto(); err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	for name, s := range p.Resources {
		if resp.ResourceSchemas[name], err = s.proto(); err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
	}
	for name, s := range p.DataSources {
		if resp.DataSourceSchemas[name], err = s.proto(); err != nil {
			return nil, fmt.Errorf("data source %s: %w", name, err)
		}
	}
	return &Server{p: p, schemas: resp}, nil
}

var _ tfprotov5.ProviderServer = (*Server)(nil)

func errorDiag(format string, args ...any) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{{Severity: tfprotov5.DiagnosticSeverityError, Summary: "stand-in provider",
		Detail: fmt.Sprintf(format, args...)}}
}

// GetMetadata lists the resources and data sources.
func (s *Server) GetMetadata(context.Context, *tfprotov5.GetMetadataRequest) (*tfprotov5.GetMetadataResponse, error) {
	out := &tfprotov5.GetMetadataResponse{ServerCapabilities: s.schemas.ServerCapabilities}
	for _, name := range sortedKeys(s.p.Resources) {
		out.Resources = append(out.Resources, tfprotov5.ResourceMetadata{TypeName: name})
	}
	for _, name := range sortedKeys(s.p.DataSources) {
		out.DataSources = append(out.DataSources, tfprotov5.DataSourceMetadata{TypeName: name})
	}
	return out, nil
}

// GetProviderSchema serves the schema.
func (s *Server) GetProviderSchema(context.Context, *tfprotov5.GetProviderSchemaRequest) (*tfprotov5.GetProviderSchemaResponse, error) {
	return s.schemas, nil
}

// GetResourceIdentitySchemas declares none.
func (s *Server) GetResourceIdentitySchemas(context.Context, *tfprotov5.GetResourceIdentitySchemasRequest) (*tfprotov5.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov5.GetResourceIdentitySchemasResponse{IdentitySchemas: map[string]*tfprotov5.ResourceIdentitySchema{}}, nil
}

// PrepareProviderConfig accepts what the schema accepted.
func (s *Server) PrepareProviderConfig(_ context.Context, req *tfprotov5.PrepareProviderConfigRequest) (*tfprotov5.PrepareProviderConfigResponse, error) {
	return &tfprotov5.PrepareProviderConfigResponse{PreparedConfig: req.Config}, nil
}

// ConfigureProvider needs no credentials: it talks to nothing.
func (s *Server) ConfigureProvider(context.Context, *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	return &tfprotov5.ConfigureProviderResponse{}, nil
}

// StopProvider has nothing to stop.
func (s *Server) StopProvider(context.Context, *tfprotov5.StopProviderRequest) (*tfprotov5.StopProviderResponse, error) {
	return &tfprotov5.StopProviderResponse{}, nil
}

// ValidateResourceTypeConfig checks nothing beyond the schema, which Terraform itself applies.
func (s *Server) ValidateResourceTypeConfig(context.Context, *tfprotov5.ValidateResourceTypeConfigRequest) (*tfprotov5.ValidateResourceTypeConfigResponse, error) {
	return &tfprotov5.ValidateResourceTypeConfigResponse{}, nil
}

// UpgradeResourceState reads a stored state as the current schema's.
func (s *Server) UpgradeResourceState(_ context.Context, req *tfprotov5.UpgradeResourceStateRequest) (*tfprotov5.UpgradeResourceStateResponse, error) {
	schema, ok := s.schemas.ResourceSchemas[req.TypeName]
	if !ok {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: errorDiag("unknown resource type %s", req.TypeName)}, nil
	}
	typ := schema.ValueType()
	v, err := req.RawState.UnmarshalWithOpts(typ, tfprotov5.UnmarshalOpts{ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true}})
	if err != nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: errorDiag("state of %s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, v)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.UpgradeResourceStateResponse{UpgradedState: &dv}, nil
}

// ReadResource says the resource is as it was.
func (s *Server) ReadResource(_ context.Context, req *tfprotov5.ReadResourceRequest) (*tfprotov5.ReadResourceResponse, error) {
	return &tfprotov5.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

// PlanResourceChange plans what Terraform proposes, with every computed attribute the proposal
// leaves null unknown: a create shows every computed attribute as known after apply.
func (s *Server) PlanResourceChange(_ context.Context, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	res, ok := s.p.Resources[req.TypeName]
	if !ok {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("unknown resource type %s", req.TypeName)}, nil
	}
	typ := s.schemas.ResourceSchemas[req.TypeName].ValueType()
	proposed, err := req.ProposedNewState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	planned, err := fill(res.Block, proposed, func(_ string, t tftypes.Type) tftypes.Value {
		return tftypes.NewValue(t, tftypes.UnknownValue)
	})
	if err != nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: errorDiag("%s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, planned)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.PlanResourceChangeResponse{PlannedState: &dv, PlannedPrivate: req.PriorPrivate}, nil
}

// ApplyResourceChange refuses: the stand-in plans, it never creates anything.
func (s *Server) ApplyResourceChange(_ context.Context, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: errorDiag("%s: the stand-in provider validates and plans; it cannot apply", req.TypeName)}, nil
}

// ImportResourceState refuses.
func (s *Server) ImportResourceState(_ context.Context, req *tfprotov5.ImportResourceStateRequest) (*tfprotov5.ImportResourceStateResponse, error) {
	return &tfprotov5.ImportResourceStateResponse{Diagnostics: errorDiag("%s: the stand-in provider cannot import", req.TypeName)}, nil
}

// MoveResourceState refuses.
func (s *Server) MoveResourceState(_ context.Context, req *tfprotov5.MoveResourceStateRequest) (*tfprotov5.MoveResourceStateResponse, error) {
	return &tfprotov5.MoveResourceStateResponse{Diagnostics: errorDiag("%s: the stand-in provider cannot move state", req.TargetTypeName)}, nil
}

// UpgradeResourceIdentity refuses: no resource declares an identity.
func (s *Server) UpgradeResourceIdentity(_ context.Context, req *tfprotov5.UpgradeResourceIdentityRequest) (*tfprotov5.UpgradeResourceIdentityResponse, error) {
	return &tfprotov5.UpgradeResourceIdentityResponse{Diagnostics: errorDiag("%s: no identity", req.TypeName)}, nil
}

// GenerateResourceConfig refuses.
func (s *Server) GenerateResourceConfig(_ context.Context, req *tfprotov5.GenerateResourceConfigRequest) (*tfprotov5.GenerateResourceConfigResponse, error) {
	return &tfprotov5.GenerateResourceConfigResponse{Diagnostics: errorDiag("%s: the stand-in provider cannot generate configuration", req.TypeName)}, nil
}

// ValidateDataSourceConfig checks nothing beyond the schema.
func (s *Server) ValidateDataSourceConfig(context.Context, *tfprotov5.ValidateDataSourceConfigRequest) (*tfprotov5.ValidateDataSourceConfigResponse, error) {
	return &tfprotov5.ValidateDataSourceConfigResponse{}, nil
}

// ReadDataSource answers the configuration with every computed attribute it leaves null set to
// a plausible fixed value (Plausible).
func (s *Server) ReadDataSource(_ context.Context, req *tfprotov5.ReadDataSourceRequest) (*tfprotov5.ReadDataSourceResponse, error) {
	ds, ok := s.p.DataSources[req.TypeName]
	if !ok {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("unknown data source %s", req.TypeName)}, nil
	}
	typ := s.schemas.DataSourceSchemas[req.TypeName].ValueType()
	cfg, err := req.Config.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	state, err := fill(ds.Block, cfg, Plausible)
	if err != nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: errorDiag("%s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, state)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.ReadDataSourceResponse{State: &dv}, nil
}

// CallFunction refuses: the stand-in declares no functions.
func (s *Server) CallFunction(_ context.Context, req *tfprotov5.CallFunctionRequest) (*tfprotov5.CallFunctionResponse, error) {
	return &tfprotov5.CallFunctionResponse{Error: &tfprotov5.FunctionError{Text: "no function " + req.Name}}, nil
}

// GetFunctions declares none.
func (s *Server) GetFunctions(context.Context, *tfprotov5.GetFunctionsRequest) (*tfprotov5.GetFunctionsResponse, error) {
	return &tfprotov5.GetFunctionsResponse{Functions: map[string]*tfprotov5.Function{}}, nil
}

// ValidateEphemeralResourceConfig refuses: the stand-in declares no ephemeral resources.
func (s *Server) ValidateEphemeralResourceConfig(_ context.Context, req *tfprotov5.ValidateEphemeralResourceConfigRequest) (*tfprotov5.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov5.ValidateEphemeralResourceConfigResponse{Diagnostics: errorDiag("no ephemeral resource %s", req.TypeName)}, nil
}

// OpenEphemeralResource refuses.
func (s *Server) OpenEphemeralResource(_ context.Context, req *tfprotov5.OpenEphemeralResourceRequest) (*tfprotov5.OpenEphemeralResourceResponse, error) {
	return &tfprotov5.OpenEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %s", req.TypeName)}, nil
}

// RenewEphemeralResource refuses.
func (s *Server) RenewEphemeralResource(_ context.Context, req *tfprotov5.RenewEphemeralResourceRequest) (*tfprotov5.RenewEphemeralResourceResponse, error) {
	return &tfprotov5.RenewEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %s", req.TypeName)}, nil
}

// CloseEphemeralResource refuses.
func (s *Server) CloseEphemeralResource(_ context.Context, req *tfprotov5.CloseEphemeralResourceRequest) (*tfprotov5.CloseEphemeralResourceResponse, error) {
	return &tfprotov5.CloseEphemeralResourceResponse{Diagnostics: errorDiag("no ephemeral resource %s", req.TypeName)}, nil
}

// fill returns v (an object of block b) with each computed attribute that is null replaced by
// value(name, type), in b and in every nested block.
func fill(b *Block, v tftypes.Value, value func(name string, t tftypes.Type) tftypes.Value) (tftypes.Value, error) {
	if v.IsNull() || !v.IsKnown() {
		return v, nil
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		return v, err
	}
	obj := v.Type().(tftypes.Object)
	for name, a := range b.Attributes {
		if cur, ok := attrs[name]; ok && a.Computed && cur.IsNull() {
			attrs[name] = value(name, obj.AttributeTypes[name])
		}
	}
	for name, nb := range b.BlockTypes {
		cur, ok := attrs[name]
		if !ok || cur.IsNull() || !cur.IsKnown() {
			continue
		}
		if nb.NestingMode == "single" {
			filled, err := fill(nb.Block, cur, value)
			if err != nil {
				return v, err
			}
			attrs[name] = filled
			continue
		}
		var elems []tftypes.Value
		if err := cur.As(&elems); err != nil {
			return v, fmt.Errorf("block %s: %w", name, err)
		}
		for i, e := range elems {
			filled, err := fill(nb.Block, e, value)
			if err != nil {
				return v, err
			}
			elems[i] = filled
		}
		attrs[name] = tftypes.NewValue(cur.Type(), elems)
	}
	return tftypes.NewValue(obj, attrs), nil
}

// Plausible is the value a data source answers for a computed attribute: a fixed string of the
// right shape for the few names whose shape matters (a project number, a unique id, an email,
// an md5), "standin-NAME" for other strings, 0, false, and empty collections.
func Plausible(name string, t tftypes.Type) tftypes.Value {
	switch {
	case t.Is(tftypes.String):
		return tftypes.NewValue(t, PlausibleString(name))
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, big.NewFloat(0))
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, false)
	case t.Is(tftypes.List{}), t.Is(tftypes.Set{}):
		return tftypes.NewValue(t, []tftypes.Value{})
	case t.Is(tftypes.Map{}):
		return tftypes.NewValue(t, map[string]tftypes.Value{})
	}
	return tftypes.NewValue(t, nil)
}

// PlausibleString is the string a data source answers for a computed attribute name.
func PlausibleString(name string) string {
	if s, ok := plausibleStrings[name]; ok {
		return s
	}
	return "standin-" + name
}

var plausibleStrings = map[string]string{
	"number":              "123456789012",
	"unique_id":           "104857600000000000001",
	"email":               "standin@standin-project.iam.gserviceaccount.com",
	"member":              "serviceAccount:standin@standin-project.iam.gserviceaccount.com",
	"output_md5":          "d41d8cd98f00b204e9800998ecf8427e",
	"output_sha":          "da39a3ee5e6b4b0d3255bfef95601890afd80709",
	"output_base64sha256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
}
