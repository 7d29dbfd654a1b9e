package tfstandin

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

// Provider is one provider's schema as the generator wrote it: the shape of `terraform
// providers schema -json` for one provider, with where it came from.
type Provider struct {
	Name          string `json:"-"` // the provider's local name: google, archive
	Source        string `json:"provider_source"`
	Version       string `json:"provider_version"`
	Provider      *Schema
	Resources     map[string]*Schema `json:"resource_schemas"`
	DataSources   map[string]*Schema `json:"data_source_schemas"`
	GeneratedFrom map[string]string  `json:"generated_from"`
}

// Schema is one resource's, data source's or the provider's schema.
type Schema struct {
	Version int64  `json:"version"`
	Block   *Block `json:"block"`
}

// Block is a schema block: its attributes and its nested blocks.
type Block struct {
	Attributes map[string]*Attribute   `json:"attributes"`
	BlockTypes map[string]*NestedBlock `json:"block_types"`
}

// Attribute is one attribute: its type and whether it is required, optional or computed.
type Attribute struct {
	Type     json.RawMessage `json:"type"`
	Required bool            `json:"required"`
	Optional bool            `json:"optional"`
	Computed bool            `json:"computed"`
}

// NestedBlock is a nested block type.
type NestedBlock struct {
	NestingMode string `json:"nesting_mode"`
	Block       *Block `json:"block"`
	MinItems    int64  `json:"min_items"`
	MaxItems    int64  `json:"max_items"`
}

// Load reads the embedded schema of the provider named name (google, archive).
func Load(name string) (*Provider, error) {
	b, err := schemaFiles.ReadFile("schemas/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("no stand-in schema for provider %q: %w", name, err)
	}
	var p Provider
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("schema of provider %q: %w", name, err)
	}
	p.Name = name
	if p.Provider == nil {
		p.Provider = &Schema{Block: &Block{}}
	}
	return &p, nil
}

// Names lists the providers a schema is embedded for.
func Names() []string {
	entries, _ := schemaFiles.ReadDir("schemas")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

// proto turns a schema into the plugin protocol's form.
func (s *Schema) proto() (*tfprotov5.Schema, error) {
	b, err := s.Block.proto()
	if err != nil {
		return nil, err
	}
	return &tfprotov5.Schema{Version: s.Version, Block: b}, nil
}

func (b *Block) proto() (*tfprotov5.SchemaBlock, error) {
	out := &tfprotov5.SchemaBlock{}
	for _, name := range sortedKeys(b.Attributes) {
		a := b.Attributes[name]
		t, err := ctyType(a.Type)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		out.Attributes = append(out.Attributes, &tfprotov5.SchemaAttribute{Name: name, Type: t, Required: a.Required, Optional: a.Optional, Computed: a.Computed})
	}
	for _, name := range sortedKeys(b.BlockTypes) {
		nb := b.BlockTypes[name]
		inner, err := nb.Block.proto()
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", name, err)
		}
		var mode tfprotov5.SchemaNestedBlockNestingMode
		switch nb.NestingMode {
		case "list":
			mode = tfprotov5.SchemaNestedBlockNestingModeList
		case "set":
			mode = tfprotov5.SchemaNestedBlockNestingModeSet
		case "single":
			mode = tfprotov5.SchemaNestedBlockNestingModeSingle
		default:
			return nil, fmt.Errorf("block %s: nesting mode %q", name, nb.NestingMode)
		}
		out.BlockTypes = append(out.BlockTypes, &tfprotov5.SchemaNestedBlock{TypeName: name, Block: inner, Nesting: mode, MinItems: nb.MinItems, MaxItems: nb.MaxItems})
	}
	return out, nil
}

// ctyType reads a type in Terraform's JSON form: "string", "number", "bool", ["list", T],
// ["set", T], ["map", T], ["object", {name: T}].
func ctyType(raw json.RawMessage) (tftypes.Type, error) {
	var prim string
	if json.Unmarshal(raw, &prim) == nil {
		switch prim {
		case "string":
			return tftypes.String, nil
		case "number":
			return tftypes.Number, nil
		case "bool":
			return tftypes.Bool, nil
		case "dynamic":
			return tftypes.DynamicPseudoType, nil
		}
		return nil, fmt.Errorf("type %q", prim)
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return nil, fmt.Errorf("type %s", raw)
	}
	var kind string
	if err := json.Unmarshal(pair[0], &kind); err != nil {
		return nil, fmt.Errorf("type %s", raw)
	}
	if kind == "object" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(pair[1], &fields); err != nil {
			return nil, fmt.Errorf("type %s", raw)
		}
		types := map[string]tftypes.Type{}
		for name, f := range fields {
			t, err := ctyType(f)
			if err != nil {
				return nil, err
			}
			types[name] = t
		}
		return tftypes.Object{AttributeTypes: types}, nil
	}
	elem, err := ctyType(pair[1])
	if err != nil {
		return nil, err
	}
	switch kind {
	case "list":
		return tftypes.List{ElementType: elem}, nil
	case "set":
		return tftypes.Set{ElementType: elem}, nil
	case "map":
		return tftypes.Map{ElementType: elem}, nil
	}
	return nil, fmt.Errorf("type %s", raw)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
