package httpconn_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// FuzzDefinition: decoding and validating a connector definition never panics, and one that is
// accepted is a document Postgres stores.
func FuzzDefinition(f *testing.F) {
	for _, seed := range []string{
		`{"name":"bank.wire","tags":["write"],"dispatch_url":"http://127.0.0.1:1/wires","status_url":"http://127.0.0.1:1/status"}`,
		`{"name":"a\u0000","dispatch_url":"http://127.0.0.1:1/"}`,
		`{"NAME":"a","dispatch_url":"http://127.0.0.1:1/"}`,
		`{"name":"a","dispatch_url":"http://127.0.0.1:1/\ud800"}`,
		`{"name":"a","dispatch_url":"http://127.0.0.1:1/","timeout_ms":1e1000000}`,
		`{"name":"a","dispatch_url":"http://127.0.0.1:1/","business_key_fields":["x","x"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var def httpconn.Definition
		if def.UnmarshalJSON(raw) != nil || def.Validate() != nil {
			return
		}
		stored, err := json.Marshal(def)
		require.NoError(t, err)
		require.NoError(t, jsonx.Check(stored), "accepted %q", raw)
	})
}
