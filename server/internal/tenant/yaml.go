package tenant

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// tenantMap is the tenants mapping of a tenants file, decoded in linear
// time. yaml.v3 checks the keys of a mapping for duplicates pairwise, which
// is quadratic: minutes of CPU for a file of 100,000 tenants, at start and
// at every SIGHUP. Here the names are checked with a Go map, and each
// tenant is decoded alone, refusing unknown fields as the file's decoder
// (KnownFields) does.
type tenantMap map[string]tenantJSON

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *tenantMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		*m = nil
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: tenants must be a mapping of names to tenants", n.Line)
	}
	out := make(tenantMap, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var name string
		if err := k.Decode(&name); err != nil {
			return err
		}
		if prev, dup := lines[name]; dup {
			return fmt.Errorf("line %d: mapping key %q already defined at line %d", k.Line, name, prev)
		}
		lines[name] = k.Line
		if err := knownFields(v, reflect.TypeFor[tenantJSON]()); err != nil {
			return err
		}
		var j tenantJSON
		if err := v.Decode(&j); err != nil {
			return err
		}
		out[name] = j
	}
	*m = out
	return nil
}

// knownFields refuses a key of the mapping n that names no field of the
// struct t, through nested structs.
func knownFields(n *yaml.Node, t reflect.Type) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		f, ok := yamlField(t, k.Value)
		if !ok {
			return fmt.Errorf("line %d: field %s not found in type %s", k.Line, k.Value, t)
		}
		if err := knownFields(n.Content[i+1], f.Type); err != nil {
			return err
		}
	}
	return nil
}

// yamlField returns the field of struct t that the YAML key name decodes into.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
