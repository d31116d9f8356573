package effects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Bounds of a connector's description, args schema and tenants (Connector.Description,
// Connector.ArgsSchema, Connector.Tenants).
const (
	// MaxDescriptionBytes bounds Connector.Description.
	MaxDescriptionBytes = 4000
	// MaxArgsSchemaBytes bounds Connector.ArgsSchema.
	MaxArgsSchemaBytes = 64 << 10
	// MaxConnectorTenants bounds Connector.Tenants.
	MaxConnectorTenants = 1000
)

// ErrInvalidArgs is the error of an enqueue whose args the connector refuses — its ArgsSchema does
// not match them, or its BusinessKey cannot be derived from them — before anything is written. Its
// message says which values are wrong and why.
var ErrInvalidArgs = errors.New("effects: invalid args")

// argsSchemaURL names a connector's args schema to the compiler; nothing is ever fetched from it.
const argsSchemaURL = "urn:reckon:connector:args-schema"

// noLoader refuses every reference outside the schema: compiling never reads a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema: an args schema must be self-contained", url)
}

// checkDescribed checks Description, Tenants and ArgsSchema, and compiles ArgsSchema into argsSchema.
func (c *Connector) checkDescribed() error {
	if len(c.Description) > MaxDescriptionBytes {
		return fmt.Errorf("description: %d bytes, at most %d", len(c.Description), MaxDescriptionBytes)
	}
	if err := jsonx.CheckText(c.Description); err != nil {
		return fmt.Errorf("description: %w", err)
	}
	if len(c.Tenants) > MaxConnectorTenants {
		return fmt.Errorf("tenants: %d given, at most %d", len(c.Tenants), MaxConnectorTenants)
	}
	for i, tenant := range c.Tenants {
		if err := ident.ValidateTenantID(tenant); err != nil {
			return fmt.Errorf("tenants: %w", err)
		}
		if slices.Contains(c.Tenants[:i], tenant) {
			return fmt.Errorf("tenants: %q appears twice", tenant)
		}
	}
	c.Tenants = slices.Clone(c.Tenants)
	c.argsSchema = nil
	if trimmed := bytes.TrimSpace(c.ArgsSchema); len(trimmed) == 0 || string(trimmed) == "null" {
		c.ArgsSchema = nil // JSON's null is no schema, as an absent one
		return nil
	}
	if err := jsonx.Check(c.ArgsSchema); err != nil { // what Postgres can store, for HTTP connectors
		return fmt.Errorf("args schema: %w", err)
	}
	schema, err := compileArgsSchema(c.ArgsSchema)
	if err != nil {
		return fmt.Errorf("args schema: %w", err)
	}
	c.ArgsSchema, c.argsSchema = slices.Clone(c.ArgsSchema), schema
	return nil
}

// compileArgsSchema compiles an args schema: valid JSON, an object schema, within the size bound,
// valid against its draft's meta-schema and self-contained.
func compileArgsSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) > MaxArgsSchemaBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(raw), MaxArgsSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	object, ok := doc.(map[string]any)
	if !ok || object["type"] != "object" {
		return nil, errors.New(`want a JSON Schema object with "type": "object" (args are a JSON object)`)
	}
	compiler := jsonschema.NewCompiler()
	compiler.UseLoader(noLoader{})
	if err := compiler.AddResource(argsSchemaURL, doc); err != nil {
		return nil, oneLine(err)
	}
	schema, err := compiler.Compile(argsSchemaURL)
	if err != nil {
		return nil, oneLine(err)
	}
	return schema, nil
}

// checkArgs validates args against the connector's compiled ArgsSchema, if any: ErrInvalidArgs
// saying what is wrong.
func (c *Connector) checkArgs(args json.RawMessage) error {
	if c.argsSchema == nil {
		return nil
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("%w for %s: %v", ErrInvalidArgs, c.Name, err)
	}
	if err := c.argsSchema.Validate(value); err != nil {
		return fmt.Errorf("%w for %s: its args schema refuses them: %v", ErrInvalidArgs, c.Name, oneLine(err))
	}
	return nil
}

// AvailableTo reports whether tenant may enqueue the connector's effects: Tenants is empty or
// names it.
func (c *Connector) AvailableTo(tenant string) bool {
	return len(c.Tenants) == 0 || slices.Contains(c.Tenants, tenant)
}

// oneLine is err's message on one line, with the compiler's placeholder URL left out.
func oneLine(err error) error {
	msg := strings.ReplaceAll(err.Error(), argsSchemaURL, "schema")
	fields := strings.Fields(msg)
	return errors.New(strings.Join(fields, " "))
}
