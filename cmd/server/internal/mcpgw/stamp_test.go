package mcpgw

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every tools/call request is stamped with its JSON-RPC id under callIDMeta (replacing a value the
// client put there, keeping the rest of _meta); nothing else is touched.
func TestStampBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		callIDs    []string // the stamped ids, by message; "" for a message left unstamped
	}{
		{"call with a number id", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`, []string{"7"}},
		{"call with a string id", `{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"t"}}`, []string{`"x-1"`}},
		{"call without params", `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`, []string{"3"}},
		{"a forged stamp is replaced", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","_meta":{"reckon/call_id":"99","progressToken":"p"}}}`, []string{"4"}},
		{"other methods", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, []string{""}},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}`, []string{""}},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, []string{"1", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := stampBody([]byte(tc.body))
			var messages []map[string]json.RawMessage
			if out[0] == '[' {
				require.NoError(t, json.Unmarshal(out, &messages))
			} else {
				var one map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(out, &one))
				messages = append(messages, one)
			}
			require.Len(t, messages, len(tc.callIDs))
			for i, msg := range messages {
				var params struct {
					Name string         `json:"name"`
					Meta map[string]any `json:"_meta"`
				}
				if raw, ok := msg["params"]; ok {
					require.NoError(t, json.Unmarshal(raw, &params))
				}
				if tc.callIDs[i] == "" {
					require.NotContains(t, params.Meta, callIDMeta)
					continue
				}
				require.Equal(t, tc.callIDs[i], params.Meta[callIDMeta])
				if tc.name == "a forged stamp is replaced" {
					require.Equal(t, "p", params.Meta["progressToken"])
				}
			}
		})
	}
	for _, garbage := range []string{``, `{`, `[1,`, `"text"`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`} {
		require.Equal(t, garbage, string(stampBody([]byte(garbage))), "left for the SDK to refuse")
	}
}
