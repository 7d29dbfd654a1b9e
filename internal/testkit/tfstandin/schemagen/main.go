// Command schemagen turns a prebuilt cdktf provider npm package (the tarball
// that `npm pack` downloads) into a Terraform provider schema JSON document,
// shaped like one provider's entry in `terraform providers schema -json`.
// The stand-in provider in internal/testkit/tfstandin reads the files it writes to
// internal/testkit/tfstandin/schemas/.
//
// It is run by hand, never by `go generate` or tests. Standard library only.
//
// # Regenerating
//
// From the repository root (npm is only used to download the tarballs; the
// generator checks their sha512 against the npm registry integrity pinned
// below, and refuses any other package name or version):
//
//	mkdir -p /tmp/tfschema && (cd /tmp/tfschema && npm pack @cdktf/provider-google@16.12.1)
//	go run ./internal/testkit/tfstandin/schemagen -tgz /tmp/tfschema/cdktf-provider-google-16.12.1.tgz -out internal/testkit/tfstandin/schemas/google.json
//
//	mkdir -p /tmp/tfschema-archive && (cd /tmp/tfschema-archive && npm pack @cdktf/provider-archive@11.0.1)
//	go run ./internal/testkit/tfstandin/schemagen -tgz /tmp/tfschema-archive/cdktf-provider-archive-11.0.1.tgz -out internal/testkit/tfstandin/schemas/archive.json
//
// The resource and data source types to emit are pinned per package in the
// pins table below; -resources and -data-sources (comma-separated Terraform
// type names) replace those lists for experiments.
//
// # Inputs and pinning
//
// The tarball is read directly (archive/tar + compress/gzip). From it the
// generator uses:
//
//   - package/package.json: name and version must equal a pinned package;
//     the Terraform provider it was generated from is recorded by cdktf in
//     `cdktf.provider.name` / `cdktf.provider.version` and must match the pin
//     (@cdktf/provider-google 16.12.1 = registry.terraform.io/hashicorp/google
//     6.50.0; @cdktf/provider-archive 11.0.1 =
//     registry.terraform.io/hashicorp/archive 2.7.1). The provider version is
//     also cross-checked against the registry links in the class docs.
//   - package/.jsii: the jsii assembly. Classes are found by the Terraform
//     type name in their docs (`Represents a {@link .../docs/resources/X
//     google_x}`), never by guessing the jsii module name; base class
//     cdktf.TerraformResource / TerraformDataSource / TerraformProvider says
//     which kind. Config structs (`<Class>Config`, nested structs) give the
//     arguments: `optional: true` = optional, otherwise required. A
//     struct-typed property is a single nested block (max_items 1), an
//     `IResolvable | Struct[]` property a repeatable block. Read-only getters
//     on the resource class and on `<Struct>OutputReference` classes that are
//     not config properties are computed-only attributes.
//   - package/lib/<module>/index.js: the compiled cdktf bindings of the
//     selected modules. jsii alone cannot tell a list from a set and does not
//     carry the Terraform name of computed attributes (`buildAttribute` is
//     `build`, `outputBase64Sha256` is `output_base64sha256`). The JS does:
//     `synthesizeHclAttributes` / `<struct>ToHclTerraform` list every
//     argument with its Terraform name, `isBlock` and `type`
//     ("simple"/"list"/"set"/"map"/"struct"), and each computed getter reads
//     `this.getStringAttribute('tf_name')` (sets are wrapped in
//     `cdktf.Fn.tolist`), or returns a `cdktf.StringMap`/`...List` built with
//     the Terraform name (lists of objects record whether they wrap a set).
//     Argument names are cross-checked against the registry `#anchor` in the
//     jsii docs; any mismatch or unrecognised construct is a hard error.
//
// # Output
//
//	{"format_version":"1.0",
//	 "generated_from":{"package":"@cdktf/provider-google","version":"16.12.1"},
//	 "provider_source":"registry.terraform.io/hashicorp/google","provider_version":"6.50.0",
//	 "provider":{"version":0,"block":BLOCK},
//	 "resource_schemas":{NAME:{"version":0,"block":BLOCK}, ...},
//	 "data_source_schemas":{NAME:{"version":0,"block":BLOCK}, ...}}
//	BLOCK = {"attributes":{NAME:{"type":T, "required"|"optional"|"computed"|"optional"+"computed": true}},
//	         "block_types":{NAME:{"nesting_mode":"list"|"set"|"single","block":BLOCK,"min_items":N,"max_items":N}}}
//	T = "string" | "number" | "bool" | ["list",T] | ["set",T] | ["map",T] | ["object",{NAME:T}]
//
// Empty "attributes"/"block_types" and zero min_items/max_items are omitted.
// Keys are sorted, indentation is two spaces, and there is a trailing newline,
// so the output is deterministic.
//
// Rules:
//   - required argument: required; optional argument: optional; computed-only
//     getter: computed.
//   - `id` on every resource and data source is {"type":"string",
//     "optional":true,"computed":true} (whatever the package says).
//   - single block (struct-typed property): nesting "list" (or "set" when the
//     JS says the provider uses a set), max_items 1, min_items 1 if required.
//     cdktf marks `timeouts` as type "struct": that is a NestingSingle block
//     in the provider, emitted as nesting "single" without min/max.
//   - repeatable block: nesting "list" or "set" per the JS, min_items 1 if
//     required, no max_items.
//   - -list-nesting-only downgrades every "set" block and every "single"
//     block to "list" (single ones with max_items 1), for consumers that only
//     understand lists. The files in internal/testkit/tfstandin/schemas do not use it.
//   - computed getters of type StringMap/NumberMap/BooleanMap are
//     map(string)/map(number)/map(bool); computed lists of objects (`...List`
//     classes, e.g. google_monitoring_alert_policy.creation_record) are
//     emitted as computed ["list"|"set",["object",{...}]] built from the
//     element OutputReference's getters.
//   - the provider block is the `<Name>Provider` class's Config struct minus
//     the `alias` meta-argument.
//
// # Known limits (not representable from the package)
//
//   - optional vs optional+computed: indistinguishable for arguments, emitted
//     as optional only (e.g. service_config.service is really
//     optional+computed).
//   - sensitive, deprecated, descriptions, defaults and validation (enums,
//     regexes, ConflictsWith/ExactlyOneOf): absent; never emitted.
//   - min_items above 1 and max_items of repeatable blocks (e.g.
//     lifecycle_rule's limit of 100) are not recorded by cdktf.
//   - provider configuration blocks: cdktf types every provider block as a
//     repeatable list (there are no OutputReference classes for providers),
//     so a MaxItems 1 provider block (google's `batching`) has no max_items.
//   - resource schema versions (SchemaVersion) are not recorded; every schema
//     has "version":0.
//   - list vs set is known only through the JS described above.
//   - nested attributes (plugin-framework object/list-of-object arguments,
//     isBlock false with a struct type) and dynamic ("any") arguments are
//     rejected with an error; computed getters of any other shape than those
//     listed under Rules are an error too, except get*Attribute variants
//     with no cty equivalent (AnyMap...), which are skipped with a warning.
//     None of these occur in the pinned types: both runs are warning-free.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// pin describes one accepted npm package and what it must contain.
type pin struct {
	Version         string
	Integrity       string // npm registry dist.integrity of the tarball
	ProviderSource  string
	ProviderVersion string
	Resources       []string
	DataSources     []string
}

var pins = map[string]pin{
	"@cdktf/provider-google": {
		Version:         "16.12.1",
		Integrity:       "sha512-KqNA/5RiFT07r0PSZ6/07cJ2zESUgbj1JchVj21iBFBZVUbD+578xA/k8eq/r0cbyEgLmg9eYWeVslaYah4DCQ==",
		ProviderSource:  "registry.terraform.io/hashicorp/google",
		ProviderVersion: "6.50.0",
		Resources: []string{
			"google_artifact_registry_repository",
			"google_artifact_registry_repository_iam_member",
			"google_cloud_run_service_iam_member",
			"google_cloud_scheduler_job",
			"google_cloudfunctions2_function",
			"google_firestore_field",
			"google_firestore_index",
			"google_logging_folder_sink",
			"google_logging_metric",
			"google_logging_organization_sink",
			"google_logging_project_sink",
			"google_monitoring_alert_policy",
			"google_monitoring_dashboard",
			"google_project_iam_custom_role",
			"google_project_iam_member",
			"google_project_service",
			"google_pubsub_subscription",
			"google_pubsub_topic",
			"google_pubsub_topic_iam_member",
			"google_secret_manager_secret_iam_member",
			"google_service_account",
			"google_service_account_iam_member",
			"google_storage_bucket",
			"google_storage_bucket_object",
		},
		DataSources: []string{
			"google_project",
			"google_service_account",
		},
	},
	"@cdktf/provider-archive": {
		Version:         "11.0.1",
		Integrity:       "sha512-2Plwhj1hVUOYmQrxNbBvy2nrw/gyHZKnQFauPCwjhQX+MpRImF7cceKgX8zZgBPvB5YEP75MIFPbr4sjxDWeHw==",
		ProviderSource:  "registry.terraform.io/hashicorp/archive",
		ProviderVersion: "2.7.1",
		Resources:       []string{"archive_file"},
		DataSources:     []string{"archive_file"},
	},
}

// ---------------------------------------------------------------------------
// Output model.

type schemaFile struct {
	FormatVersion     string             `json:"format_version"`
	GeneratedFrom     generatedFrom      `json:"generated_from"`
	ProviderSource    string             `json:"provider_source"`
	ProviderVersion   string             `json:"provider_version"`
	Provider          *schema            `json:"provider"`
	ResourceSchemas   map[string]*schema `json:"resource_schemas"`
	DataSourceSchemas map[string]*schema `json:"data_source_schemas"`
}

type generatedFrom struct {
	Package string `json:"package"`
	Version string `json:"version"`
}

type schema struct {
	Version int    `json:"version"`
	Block   *block `json:"block"`
}

type block struct {
	Attributes map[string]*attribute `json:"attributes,omitempty"`
	BlockTypes map[string]*blockType `json:"block_types,omitempty"`
}

type attribute struct {
	Type     any  `json:"type"`
	Required bool `json:"required,omitempty"`
	Optional bool `json:"optional,omitempty"`
	Computed bool `json:"computed,omitempty"`
}

type blockType struct {
	NestingMode string `json:"nesting_mode"`
	Block       *block `json:"block"`
	MinItems    int    `json:"min_items,omitempty"`
	MaxItems    int    `json:"max_items,omitempty"`
}

func newBlock() *block {
	return &block{Attributes: map[string]*attribute{}, BlockTypes: map[string]*blockType{}}
}

// ---------------------------------------------------------------------------
// Input model: package.json and the parts of the jsii assembly we use.

type packageJSON struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Cdktf   struct {
		Provider struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"provider"`
	} `json:"cdktf"`
}

type assembly struct {
	Schema  string               `json:"schema"`
	Name    string               `json:"name"`
	Version string               `json:"version"`
	Types   map[string]*jsiiType `json:"types"`
}

type jsiiType struct {
	FQN        string       `json:"fqn"`
	Kind       string       `json:"kind"`
	Base       string       `json:"base"`
	Datatype   bool         `json:"datatype"`
	Docs       jsiiDocs     `json:"docs"`
	Properties []jsiiProp   `json:"properties"`
	Methods    []jsiiMethod `json:"methods"`
	Location   struct {
		Filename string `json:"filename"`
	} `json:"locationInModule"`
}

type jsiiDocs struct {
	Summary string `json:"summary"`
	Remarks string `json:"remarks"`
}

type jsiiProp struct {
	Name      string   `json:"name"`
	Type      typeRef  `json:"type"`
	Optional  bool     `json:"optional"`
	Immutable bool     `json:"immutable"`
	Static    bool     `json:"static"`
	Docs      jsiiDocs `json:"docs"`
}

type jsiiMethod struct {
	Name    string `json:"name"`
	Static  bool   `json:"static"`
	Returns *struct {
		Type typeRef `json:"type"`
	} `json:"returns"`
}

type typeRef struct {
	Primitive  string         `json:"primitive,omitempty"`
	FQN        string         `json:"fqn,omitempty"`
	Collection *collectionRef `json:"collection,omitempty"`
	Union      *unionRef      `json:"union,omitempty"`
}

type collectionRef struct {
	Kind        string  `json:"kind"`
	ElementType typeRef `json:"elementtype"`
}

type unionRef struct {
	Types []typeRef `json:"types"`
}

func (t typeRef) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

// stripResolvable removes cdktf.IResolvable from a union; a union with one
// remaining member becomes that member.
func stripResolvable(t typeRef) typeRef {
	if t.Union == nil {
		return t
	}
	var rest []typeRef
	for _, u := range t.Union.Types {
		if u.FQN != "cdktf.IResolvable" {
			rest = append(rest, u)
		}
	}
	if len(rest) == 1 {
		return stripResolvable(rest[0])
	}
	return typeRef{Union: &unionRef{Types: rest}}
}

// ---------------------------------------------------------------------------
// Reading the tarball.

const (
	tarPackageJSON = "package/package.json"
	tarJsii        = "package/.jsii"
)

func tarballIntegrity(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// readTarball returns the contents of the regular files for which want is true.
func readTarball(path string, want func(string) bool) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag != tar.TypeReg || !want(hdr.Name) {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, hdr.Name, err)
		}
		out[hdr.Name] = b
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// The compiled JS of one cdktf module.

type jsModule struct {
	path string
	src  string
}

type hclAttr struct {
	TFName  string
	IsBlock bool
	Kind    string // simple, list, set, map, struct
}

type ctorAssign struct {
	Class    string
	TFName   string
	WrapsSet bool
}

var (
	reHCLAttr   = regexp.MustCompile(`(?s)(\w+): \{\s*value: (.*?),\s*isBlock: (true|false),\s*type: "(\w+)",\s*storageClassType: "(\w+)",\s*\}`)
	reHCLJSName = regexp.MustCompile(`(?:struct\.|this\._)(\w+)`)
	reGetter    = regexp.MustCompile(`\bget (\w+)\(\) \{\s*return ([^;{}]*);\s*\}`)
	reCtor      = regexp.MustCompile(`this\._(\w+) = new ([\w.]+)\(this, "(\w+)"(?:, (true|false))?\);`)
	reAttrCall  = regexp.MustCompile(`^(cdktf\.Fn\.tolist\()?this\.get(\w*)Attribute\('(\w+)'\)\)?$`)
	reThisField = regexp.MustCompile(`^this\._(\w+)$`)
	reTFType    = regexp.MustCompile(`terraformResourceType: '(\w+)'`)
)

// classBody returns the source of `class name extends ...` up to the next
// top-level class.
func (m *jsModule) classBody(name string) (string, error) {
	marker := "\nclass " + name + " extends "
	i := strings.Index(m.src, marker)
	if i < 0 {
		return "", fmt.Errorf("%s: class %s not found", m.path, name)
	}
	body := m.src[i+1:]
	if j := strings.Index(body, "\nclass "); j >= 0 {
		body = body[:j+1]
	}
	return body, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// structHCL parses `function <struct>ToHclTerraform(struct) {...}`.
func (m *jsModule) structHCL(structName string) (map[string]hclAttr, error) {
	marker := "\nfunction " + lowerFirst(structName) + "ToHclTerraform(struct) {"
	i := strings.Index(m.src, marker)
	if i < 0 {
		return nil, fmt.Errorf("%s: %s not found", m.path, strings.TrimSpace(marker))
	}
	body := m.src[i+1:]
	j := strings.Index(body, "\n}\n")
	if j < 0 {
		return nil, fmt.Errorf("%s: end of %sToHclTerraform not found", m.path, lowerFirst(structName))
	}
	return parseHCLAttrs(m.path, body[:j])
}

// classHCL parses a resource/data source/provider's synthesizeHclAttributes.
func (m *jsModule) classHCL(className string) (map[string]hclAttr, error) {
	body, err := m.classBody(className)
	if err != nil {
		return nil, err
	}
	i := strings.Index(body, "synthesizeHclAttributes() {")
	if i < 0 {
		return nil, fmt.Errorf("%s: %s.synthesizeHclAttributes not found", m.path, className)
	}
	body = body[i:]
	j := strings.Index(body, "// remove undefined attributes")
	if j < 0 {
		return nil, fmt.Errorf("%s: end of %s.synthesizeHclAttributes not found", m.path, className)
	}
	return parseHCLAttrs(m.path, body[:j])
}

// parseHCLAttrs maps jsii property names to the attribute descriptions in a
// cdktf `const attrs = {...}` literal.
func parseHCLAttrs(path, body string) (map[string]hclAttr, error) {
	out := map[string]hclAttr{}
	matches := reHCLAttr.FindAllStringSubmatch(body, -1)
	if n := strings.Count(body, "isBlock: "); n != len(matches) {
		return nil, fmt.Errorf("%s: parsed %d of %d HCL attributes in %.60q", path, len(matches), n, body)
	}
	for _, mm := range matches {
		js := reHCLJSName.FindStringSubmatch(mm[2])
		if js == nil {
			return nil, fmt.Errorf("%s: no property name in HCL value %q", path, mm[2])
		}
		if _, dup := out[js[1]]; dup {
			return nil, fmt.Errorf("%s: property %s appears twice", path, js[1])
		}
		out[js[1]] = hclAttr{TFName: mm[1], IsBlock: mm[3] == "true", Kind: mm[4]}
	}
	return out, nil
}

// getters returns a class's single-expression getters: jsName -> expression.
func (m *jsModule) getters(className string) (map[string]string, map[string]ctorAssign, error) {
	body, err := m.classBody(className)
	if err != nil {
		return nil, nil, err
	}
	g := map[string]string{}
	for _, mm := range reGetter.FindAllStringSubmatch(body, -1) {
		g[mm[1]] = strings.TrimSpace(mm[2])
	}
	c := map[string]ctorAssign{}
	for _, mm := range reCtor.FindAllStringSubmatch(body, -1) {
		c[mm[1]] = ctorAssign{Class: mm[2], TFName: mm[3], WrapsSet: mm[4] == "true"}
	}
	return g, c, nil
}

// ---------------------------------------------------------------------------
// Generator.

type gen struct {
	pkg       string // npm package name, also the jsii fqn prefix
	types     map[string]*jsiiType
	js        map[string]*jsModule // by tarball path
	listOnly  bool
	warnings  []string
	resources map[string]string // Terraform type -> class fqn
	dataSrcs  map[string]string
	dups      map[string]bool // "resources/NAME", "data-sources/NAME" with more than one class
	provider  string          // provider class fqn
}

func (g *gen) warnf(format string, args ...any) {
	g.warnings = append(g.warnings, fmt.Sprintf(format, args...))
}

func shortName(fqn string) string { return fqn[strings.LastIndex(fqn, ".")+1:] }

// jsPath is the tarball path of the compiled module holding type fqn.
func (g *gen) jsPath(fqn string) (string, error) {
	t := g.types[fqn]
	if t == nil {
		return "", fmt.Errorf("type %s not in assembly", fqn)
	}
	fn := t.Location.Filename
	if !strings.HasPrefix(fn, "src/") || !strings.HasSuffix(fn, ".ts") {
		return "", fmt.Errorf("type %s: unexpected source file %q", fqn, fn)
	}
	return "package/lib/" + strings.TrimSuffix(strings.TrimPrefix(fn, "src/"), ".ts") + ".js", nil
}

func (g *gen) module(fqn string) (*jsModule, error) {
	p, err := g.jsPath(fqn)
	if err != nil {
		return nil, err
	}
	m := g.js[p]
	if m == nil {
		return nil, fmt.Errorf("type %s: %s not loaded", fqn, p)
	}
	return m, nil
}

func (g *gen) isStruct(fqn string) bool {
	t := g.types[fqn]
	return t != nil && t.Kind == "interface" && t.Datatype
}

var reRepresents = regexp.MustCompile(`^Represents a \{@link https://registry\.terraform\.io/providers/([\w-]+)/([\w-]+)/([^/\s]+)/docs(?:/(resources|data-sources)/\w+)? (\w+)\}`)

// index finds the provider, resource and data source classes by the
// Terraform type name in their docs.
func (g *gen) index(providerSource, providerVersion string) error {
	g.resources = map[string]string{}
	g.dataSrcs = map[string]string{}
	g.dups = map[string]bool{}
	for fqn, t := range g.types {
		if t.Kind != "class" || !strings.HasPrefix(fqn, g.pkg+".") {
			continue
		}
		var kind string
		switch t.Base {
		case "cdktf.TerraformResource":
			kind = "resources"
		case "cdktf.TerraformDataSource":
			kind = "data-sources"
		case "cdktf.TerraformProvider":
			kind = ""
		default:
			continue
		}
		m := reRepresents.FindStringSubmatch(t.Docs.Summary)
		if m == nil || m[4] != kind {
			return fmt.Errorf("%s: cannot read Terraform type from docs summary %q", fqn, t.Docs.Summary)
		}
		if src := "registry.terraform.io/" + m[1] + "/" + m[2]; src != providerSource || m[3] != providerVersion {
			return fmt.Errorf("%s: docs link to %s %s, package.json says %s %s", fqn, src, m[3], providerSource, providerVersion)
		}
		name := m[5]
		var idx map[string]string
		switch kind {
		case "resources":
			idx = g.resources
		case "data-sources":
			idx = g.dataSrcs
		default:
			if g.provider != "" {
				return fmt.Errorf("two provider classes: %s and %s", g.provider, fqn)
			}
			g.provider = fqn
			continue
		}
		if _, ok := idx[name]; ok {
			g.dups[kind+"/"+name] = true
		}
		idx[name] = fqn
	}
	if g.provider == "" {
		return errors.New("no provider class (base cdktf.TerraformProvider) in assembly")
	}
	return nil
}

func (g *gen) classFor(kind, name string) (string, error) {
	idx, label := g.resources, "resources"
	if kind == "data" {
		idx, label = g.dataSrcs, "data-sources"
	}
	if g.dups[label+"/"+name] {
		return "", fmt.Errorf("%s %s: more than one class", label, name)
	}
	fqn, ok := idx[name]
	if !ok {
		return "", fmt.Errorf("%s %s: no class in %s", label, name, g.pkg)
	}
	return fqn, nil
}

var reDocsAnchor = regexp.MustCompile(`\{@link https://registry\.terraform\.io/\S*#(\w+) `)

// docsAnchor is the Terraform name from the registry link in a property's
// docs ("" if there is none).
func docsAnchor(d jsiiDocs) string {
	m := reDocsAnchor.FindAllStringSubmatch(d.Remarks+" "+d.Summary, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

type level int

const (
	levelNested level = iota
	levelTop
	levelProvider
)

var primitives = map[string]string{"string": "string", "number": "number", "boolean": "bool"}

// topSchema builds the schema of a resource, data source or provider class.
func (g *gen) topSchema(classFQN, tfName string, lv level) (*schema, error) {
	mod, err := g.module(classFQN)
	if err != nil {
		return nil, err
	}
	body, err := mod.classBody(shortName(classFQN))
	if err != nil {
		return nil, err
	}
	if m := reTFType.FindStringSubmatch(body); m == nil || m[1] != tfName {
		return nil, fmt.Errorf("%s: JS constructor terraformResourceType is %v, want %s", classFQN, m, tfName)
	}
	hcl, err := mod.classHCL(shortName(classFQN))
	if err != nil {
		return nil, err
	}
	b, err := g.configBlock(mod, classFQN+"Config", classFQN, hcl, lv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tfName, err)
	}
	if lv == levelTop {
		b.Attributes["id"] = &attribute{Type: "string", Optional: true, Computed: true}
	}
	return &schema{Version: 0, Block: b}, nil
}

// configBlock builds the block for config struct structFQN; classFQN (the
// resource class or the struct's OutputReference, may be absent) supplies
// the computed-only attributes.
func (g *gen) configBlock(mod *jsModule, structFQN, classFQN string, hcl map[string]hclAttr, lv level) (*block, error) {
	st := g.types[structFQN]
	if !g.isStruct(structFQN) {
		return nil, fmt.Errorf("%s is not a jsii struct", structFQN)
	}
	b := newBlock()
	config := map[string]bool{}
	seen := map[string]bool{}
	for _, p := range st.Properties {
		config[p.Name] = true
		h, ok := hcl[p.Name]
		if !ok {
			return nil, fmt.Errorf("%s.%s: not in the JS HCL attributes", shortName(structFQN), p.Name)
		}
		delete(hcl, p.Name)
		if a := docsAnchor(p.Docs); a != "" && a != h.TFName {
			return nil, fmt.Errorf("%s.%s: docs anchor #%s but JS name %s", shortName(structFQN), p.Name, a, h.TFName)
		}
		if lv == levelProvider && h.TFName == "alias" {
			continue // meta-argument, not part of the provider schema
		}
		if lv == levelTop && h.TFName == "id" {
			continue // fixed below
		}
		if seen[h.TFName] {
			return nil, fmt.Errorf("%s: Terraform name %s used twice", shortName(structFQN), h.TFName)
		}
		seen[h.TFName] = true
		where := shortName(structFQN) + "." + p.Name
		t := stripResolvable(p.Type)

		// Blocks.
		var elem string
		repeatable := false
		switch {
		case t.FQN != "" && g.isStruct(t.FQN):
			elem = t.FQN
		case t.Collection != nil && t.Collection.Kind == "array":
			if e := stripResolvable(t.Collection.ElementType); e.FQN != "" && g.isStruct(e.FQN) {
				elem, repeatable = e.FQN, true
			}
		}
		if elem != "" {
			if !h.IsBlock {
				return nil, fmt.Errorf("%s: struct-typed but JS says isBlock false (nested attribute types are not supported)", where)
			}
			bt, err := g.nestedBlock(elem, h, repeatable, !p.Optional, where)
			if err != nil {
				return nil, err
			}
			b.BlockTypes[h.TFName] = bt
			continue
		}

		// Attributes.
		if h.IsBlock {
			return nil, fmt.Errorf("%s: JS says isBlock but jsii type is %s", where, t)
		}
		ct, err := configType(t, h.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		b.Attributes[h.TFName] = &attribute{Type: ct, Required: !p.Optional, Optional: p.Optional}
	}
	if len(hcl) != 0 {
		var rest []string
		for k := range hcl {
			rest = append(rest, k)
		}
		sort.Strings(rest)
		return nil, fmt.Errorf("%s: JS HCL attributes without jsii property: %v", shortName(structFQN), rest)
	}

	if g.types[classFQN] == nil {
		return b, nil
	}
	comp, err := g.computedGetters(mod, classFQN, config)
	if err != nil {
		return nil, err
	}
	for name, ct := range comp {
		if lv == levelTop && name == "id" {
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: computed getter %s collides with an argument", shortName(classFQN), name)
		}
		seen[name] = true
		b.Attributes[name] = &attribute{Type: ct, Computed: true}
	}
	return b, nil
}

func (g *gen) nestedBlock(elemFQN string, h hclAttr, repeatable, required bool, where string) (*blockType, error) {
	mod, err := g.module(elemFQN)
	if err != nil {
		return nil, err
	}
	hcl, err := mod.structHCL(shortName(elemFQN))
	if err != nil {
		return nil, err
	}
	inner, err := g.configBlock(mod, elemFQN, elemFQN+"OutputReference", hcl, levelNested)
	if err != nil {
		return nil, err
	}
	bt := &blockType{Block: inner}
	switch h.Kind {
	case "list", "set":
		bt.NestingMode = h.Kind
	case "struct":
		if repeatable {
			return nil, fmt.Errorf("%s: repeatable block with JS type struct", where)
		}
		bt.NestingMode = "single"
	default:
		return nil, fmt.Errorf("%s: block with JS type %q", where, h.Kind)
	}
	if required {
		bt.MinItems = 1
	}
	if !repeatable {
		bt.MaxItems = 1
	}
	if bt.NestingMode == "single" {
		bt.MinItems, bt.MaxItems = 0, 0
	}
	if g.listOnly && bt.NestingMode != "list" {
		if bt.NestingMode == "single" {
			bt.MaxItems = 1
		}
		bt.NestingMode = "list"
	}
	return bt, nil
}

// configType is the cty type of an argument; kind is the JS HCL type.
func configType(t typeRef, kind string) (any, error) {
	if t.Primitive != "" {
		p, ok := primitives[t.Primitive]
		if !ok {
			return nil, fmt.Errorf("unsupported primitive %q", t.Primitive)
		}
		if kind != "simple" {
			return nil, fmt.Errorf("primitive %s but JS type %q", t.Primitive, kind)
		}
		return p, nil
	}
	if t.Collection == nil {
		return nil, fmt.Errorf("unsupported type %s", t)
	}
	e := stripResolvable(t.Collection.ElementType)
	p, ok := primitives[e.Primitive]
	if !ok {
		return nil, fmt.Errorf("unsupported collection element %s", e)
	}
	switch {
	case t.Collection.Kind == "array" && (kind == "list" || kind == "set"):
		return []any{kind, p}, nil
	case t.Collection.Kind == "map" && kind == "map":
		return []any{"map", p}, nil
	}
	return nil, fmt.Errorf("collection %s but JS type %q", t.Collection.Kind, kind)
}

// computedGetters returns the computed-only attributes of a class: read-only
// getters that are neither config properties nor their `...Input` mirrors.
func (g *gen) computedGetters(mod *jsModule, classFQN string, config map[string]bool) (map[string]any, error) {
	cls := g.types[classFQN]
	getters, ctors, err := mod.getters(shortName(classFQN))
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, p := range cls.Properties {
		if p.Static || !p.Immutable || config[p.Name] {
			continue
		}
		if base, ok := strings.CutSuffix(p.Name, "Input"); ok && config[base] {
			continue
		}
		where := shortName(classFQN) + "." + p.Name
		name, ct, err := g.computedGetter(classFQN, p, getters, ctors)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if ct == nil {
			continue
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: Terraform name %s used twice", where, name)
		}
		out[name] = ct
	}
	return out, nil
}

// computedGetter decodes one computed getter; a nil type means "skipped".
func (g *gen) computedGetter(classFQN string, p jsiiProp, getters map[string]string, ctors map[string]ctorAssign) (string, any, error) {
	expr, ok := getters[p.Name]
	if !ok {
		return "", nil, errors.New("no single-expression JS getter")
	}
	jt := stripResolvable(p.Type)
	if m := reAttrCall.FindStringSubmatch(expr); m != nil {
		isSet, kind, name := m[1] != "", m[2], m[3]
		var ct any
		var want string
		switch kind {
		case "String":
			ct, want = "string", `{"primitive":"string"}`
		case "Number":
			ct, want = "number", `{"primitive":"number"}`
		case "Boolean":
			ct, want = "bool", `{"fqn":"cdktf.IResolvable"}`
		case "List":
			ct, want = []any{"list", "string"}, `{"collection":{"kind":"array","elementtype":{"primitive":"string"}}}`
		case "NumberList":
			ct, want = []any{"list", "number"}, `{"collection":{"kind":"array","elementtype":{"primitive":"number"}}}`
		case "StringMap":
			ct, want = []any{"map", "string"}, `{"collection":{"kind":"map","elementtype":{"primitive":"string"}}}`
		case "NumberMap":
			ct, want = []any{"map", "number"}, `{"collection":{"kind":"map","elementtype":{"primitive":"number"}}}`
		case "BooleanMap":
			ct, want = []any{"map", "bool"}, `{"collection":{"kind":"map","elementtype":{"primitive":"boolean"}}}`
		default:
			g.warnf("%s.%s: skipped computed %s (get%sAttribute is not representable)", shortName(classFQN), p.Name, name, kind)
			return name, nil, nil
		}
		if got := p.Type.String(); got != want && jt.String() != want {
			return "", nil, fmt.Errorf("JS get%sAttribute but jsii type %s", kind, got)
		}
		if isSet {
			l, ok := ct.([]any)
			if !ok || l[0] != "list" {
				return "", nil, fmt.Errorf("cdktf.Fn.tolist around get%sAttribute", kind)
			}
			ct = []any{"set", l[1]}
		}
		return name, ct, nil
	}
	m := reThisField.FindStringSubmatch(expr)
	if m == nil {
		return "", nil, fmt.Errorf("unrecognised JS getter %q", expr)
	}
	c, ok := ctors[m[1]]
	if !ok {
		if strings.HasSuffix(p.Name, "Input") {
			return "", nil, fmt.Errorf("input getter without config property (%q)", expr)
		}
		return "", nil, fmt.Errorf("getter returns this._%s, which the constructor does not build", m[1])
	}
	switch c.Class {
	case "cdktf.StringMap":
		return c.TFName, []any{"map", "string"}, nil
	case "cdktf.NumberMap":
		return c.TFName, []any{"map", "number"}, nil
	case "cdktf.BooleanMap":
		return c.TFName, []any{"map", "bool"}, nil
	}
	listFQN := classFQN[:strings.LastIndex(classFQN, ".")+1] + c.Class // same jsii module
	if jt.FQN != listFQN {
		return "", nil, fmt.Errorf("constructor builds %s but jsii type is %s", c.Class, p.Type)
	}
	lt := g.types[listFQN]
	if lt == nil || lt.Kind != "class" || lt.Base != "cdktf.ComplexList" {
		g.warnf("%s.%s: skipped computed %s of class %s", shortName(classFQN), p.Name, c.TFName, c.Class)
		return c.TFName, nil, nil
	}
	var elemFQN string
	for _, meth := range lt.Methods {
		if meth.Name == "get" && !meth.Static && meth.Returns != nil {
			elemFQN = meth.Returns.Type.FQN
		}
	}
	if g.types[elemFQN] == nil {
		return "", nil, fmt.Errorf("%s.get returns unknown type %q", c.Class, elemFQN)
	}
	obj, err := g.computedObject(elemFQN)
	if err != nil {
		return "", nil, err
	}
	mode := "list"
	if c.WrapsSet {
		mode = "set"
	}
	return c.TFName, []any{mode, []any{"object", obj}}, nil
}

// computedObject is the object type of a computed list element class.
func (g *gen) computedObject(elemFQN string) (map[string]any, error) {
	mod, err := g.module(elemFQN)
	if err != nil {
		return nil, err
	}
	attrs, err := g.computedGetters(mod, elemFQN, map[string]bool{})
	if err != nil {
		return nil, err
	}
	if len(attrs) == 0 {
		return nil, fmt.Errorf("%s: computed object without attributes", shortName(elemFQN))
	}
	return attrs, nil
}

// ---------------------------------------------------------------------------

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run() error {
	tgz := flag.String("tgz", "", "npm pack tarball of a pinned cdktf provider package (required)")
	out := flag.String("out", "", "output JSON file (required)")
	resFlag := flag.String("resources", "", "comma-separated resource types (default: the pinned list)")
	dataFlag := flag.String("data-sources", "", "comma-separated data source types (default: the pinned list)")
	listOnly := flag.Bool("list-nesting-only", false, `emit every block with nesting_mode "list" (sets and single blocks downgraded)`)
	flag.Parse()
	if *tgz == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		return errors.New("-tgz and -out are required")
	}

	integrity, err := tarballIntegrity(*tgz)
	if err != nil {
		return err
	}
	files, err := readTarball(*tgz, func(n string) bool { return n == tarPackageJSON || n == tarJsii })
	if err != nil {
		return err
	}
	if files[tarPackageJSON] == nil || files[tarJsii] == nil {
		return fmt.Errorf("%s: missing %s or %s", *tgz, tarPackageJSON, tarJsii)
	}
	var pj packageJSON
	if err := json.Unmarshal(files[tarPackageJSON], &pj); err != nil {
		return fmt.Errorf("%s: %w", tarPackageJSON, err)
	}
	pn, ok := pins[pj.Name]
	if !ok {
		return fmt.Errorf("refusing package %q: not pinned", pj.Name)
	}
	if pj.Version != pn.Version {
		return fmt.Errorf("refusing %s@%s: pinned version is %s", pj.Name, pj.Version, pn.Version)
	}
	if integrity != pn.Integrity {
		return fmt.Errorf("refusing %s: tarball integrity %s, pinned %s", *tgz, integrity, pn.Integrity)
	}
	if pj.Cdktf.Provider.Name != pn.ProviderSource || pj.Cdktf.Provider.Version != pn.ProviderVersion {
		return fmt.Errorf("refusing %s@%s: package.json cdktf.provider is %s %s, pinned %s %s", pj.Name, pj.Version,
			pj.Cdktf.Provider.Name, pj.Cdktf.Provider.Version, pn.ProviderSource, pn.ProviderVersion)
	}

	var asm assembly
	if err := json.Unmarshal(files[tarJsii], &asm); err != nil {
		return fmt.Errorf("%s: %w", tarJsii, err)
	}
	delete(files, tarJsii)
	if asm.Schema != "jsii/0.10.0" {
		return fmt.Errorf("%s: unsupported jsii schema %q", tarJsii, asm.Schema)
	}
	if asm.Name != pj.Name || asm.Version != pj.Version {
		return fmt.Errorf("%s is %s@%s, package.json %s@%s", tarJsii, asm.Name, asm.Version, pj.Name, pj.Version)
	}

	g := &gen{pkg: pj.Name, types: asm.Types, listOnly: *listOnly, js: map[string]*jsModule{}}
	if err := g.index(pj.Cdktf.Provider.Name, pj.Cdktf.Provider.Version); err != nil {
		return err
	}
	resources, dataSources := pn.Resources, pn.DataSources
	if *resFlag != "" {
		resources = splitList(*resFlag)
	}
	if *dataFlag != "" {
		dataSources = splitList(*dataFlag)
	}

	type sel struct {
		kind, name, fqn string
	}
	sels := []sel{{"provider", pj.Name, g.provider}}
	for _, r := range resources {
		fqn, err := g.classFor("resource", r)
		if err != nil {
			return err
		}
		sels = append(sels, sel{"resource", r, fqn})
	}
	for _, d := range dataSources {
		fqn, err := g.classFor("data", d)
		if err != nil {
			return err
		}
		sels = append(sels, sel{"data", d, fqn})
	}

	// Second pass: the compiled modules of the selected classes.
	wantJS := map[string]bool{}
	for _, s := range sels {
		p, err := g.jsPath(s.fqn)
		if err != nil {
			return err
		}
		wantJS[p] = true
	}
	jsFiles, err := readTarball(*tgz, func(n string) bool { return wantJS[n] })
	if err != nil {
		return err
	}
	for p := range wantJS {
		if jsFiles[p] == nil {
			return fmt.Errorf("%s: missing %s", *tgz, p)
		}
		g.js[p] = &jsModule{path: p, src: string(jsFiles[p])}
	}

	doc := &schemaFile{
		FormatVersion:     "1.0",
		GeneratedFrom:     generatedFrom{Package: pj.Name, Version: pj.Version},
		ProviderSource:    pj.Cdktf.Provider.Name,
		ProviderVersion:   pj.Cdktf.Provider.Version,
		ResourceSchemas:   map[string]*schema{},
		DataSourceSchemas: map[string]*schema{},
	}
	providerName := pj.Cdktf.Provider.Name[strings.LastIndex(pj.Cdktf.Provider.Name, "/")+1:]
	for _, s := range sels {
		switch s.kind {
		case "provider":
			sc, err := g.topSchema(s.fqn, providerName, levelProvider)
			if err != nil {
				return fmt.Errorf("provider: %w", err)
			}
			doc.Provider = sc
		case "resource":
			sc, err := g.topSchema(s.fqn, s.name, levelTop)
			if err != nil {
				return err
			}
			doc.ResourceSchemas[s.name] = sc
		case "data":
			sc, err := g.topSchema(s.fqn, s.name, levelTop)
			if err != nil {
				return fmt.Errorf("data %w", err)
			}
			doc.DataSourceSchemas[s.name] = sc
		}
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".schemagen-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		os.Remove(tmp.Name())
		return err
	}

	for _, w := range g.warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	fmt.Fprintf(os.Stderr, "%s: %s@%s -> %s %s: provider + %d resources + %d data sources, %d bytes\n",
		*out, pj.Name, pj.Version, pj.Cdktf.Provider.Name, pj.Cdktf.Provider.Version,
		len(doc.ResourceSchemas), len(doc.DataSourceSchemas), buf.Len())
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
