package effects

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func describedConnector(schema string, tenants ...string) Connector {
	return Connector{
		Name: "tickets.create", Tags: []Tag{TagWrite, TagIdempotent}, Description: "Open a ticket",
		ArgsSchema: json.RawMessage(schema), Tenants: tenants,
		Dispatch: func(context.Context, Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	}
}

// An args schema is compiled when the connector is registered: one that is not an object schema,
// does not compile or reaches outside itself is refused, naming the problem.
func TestArgsSchemaRegistration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema, problem string
	}{
		{"object", `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`, ""},
		{"none", ``, ""},
		{"null", `null`, ""},
		{"draft 2020-12 named", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`, ""},
		{"draft-07 named", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"integer"}}}`, ""},
		{"local reference", `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n"}}}`, ""},
		{"not JSON", `{"type":`, "JSON"},
		{"not an object schema", `{"type":"array"}`, `"type": "object"`},
		{"bad keyword value", `{"type":"object","properties":{"n":{"type":"integr"}}}`, "args schema"},
		{"remote reference", `{"type":"object","properties":{"n":{"$ref":"https://example.com/s.json"}}}`, "outside the schema"},
		{"file reference", `{"type":"object","properties":{"n":{"$ref":"file:///etc/passwd"}}}`, "outside the schema"},
		{"too large", `{"type":"object","description":"` + strings.Repeat("x", MaxArgsSchemaBytes) + `"}`, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateConnector(describedConnector(tc.schema))
			if tc.problem == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.problem)
		})
	}
	require.ErrorContains(t, ValidateConnector(describedConnector(``, "not a tenant!")), "tenants")
	require.ErrorContains(t, ValidateConnector(describedConnector(``, "acme", "globex", "acme")), `tenants: "acme" appears twice`)
	long := describedConnector(``)
	long.Description = strings.Repeat("d", MaxDescriptionBytes+1)
	require.ErrorContains(t, ValidateConnector(long), "description")
}

// Enqueueing checks the args against the schema and the tenant against Tenants before anything
// is written: resolve, the first step of every enqueue, refuses them.
func TestArgsSchemaEnqueue(t *testing.T) {
	t.Parallel()
	registry := NewRegistry()
	registry.MustRegister(describedConnector(`{"type":"object","properties":{"title":{"type":"string","minLength":1}},"required":["title"],"additionalProperties":false}`, "acme"))
	spec := Spec{TenantID: "acme", Connector: "tickets.create", IdempotencyKey: "k", Args: map[string]any{"title": "printer on fire"}}
	_, err := registry.resolve(spec)
	require.NoError(t, err)

	for _, args := range []any{map[string]any{}, map[string]any{"title": 7}, map[string]any{"title": "x", "extra": true}} {
		bad := spec
		bad.Args = args
		_, err := registry.resolve(bad)
		require.ErrorIs(t, err, ErrInvalidArgs, "args %v", args)
	}
	other := spec
	other.TenantID = "globex"
	_, err = registry.resolve(other)
	require.True(t, errors.Is(err, ErrUnknownConnector), "another tenant's connector: %v", err)
	connector, _ := registry.Get("tickets.create")
	require.True(t, connector.AvailableTo("acme"))
	require.False(t, connector.AvailableTo("globex"))
}
