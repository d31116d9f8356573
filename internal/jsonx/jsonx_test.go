package jsonx_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/jsonx"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
		err  bool
	}{
		{"nil is an empty object", nil, `{}`, false},
		{"raw message as is", json.RawMessage(`{"a":1}`), `{"a":1}`, false},
		{"bytes as is", []byte(`[1,2]`), `[1,2]`, false},
		{"a value is marshalled", map[string]int{"b": 2}, `{"b":2}`, false},
		{"invalid raw JSON", json.RawMessage(`{"a":`), ``, true},
		{"invalid bytes", []byte(`nope`), ``, true},
		{"unmarshallable value", func() {}, ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jsonx.Marshal(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

func TestEqual(t *testing.T) {
	require.True(t, jsonx.Equal([]byte(`{"a":1,"b":[1,2]}`), []byte(`{ "b": [1, 2], "a": 1 }`)))
	require.False(t, jsonx.Equal([]byte(`{"a":1}`), []byte(`{"a":2}`)))
	require.False(t, jsonx.Equal([]byte(`[1,2]`), []byte(`[2,1]`)))
	require.False(t, jsonx.Equal([]byte(`{"a":`), []byte(`{"a":`)), "invalid JSON equals nothing")
}

// TestDecodeStrictNull: null is refused, naming the field, where encoding/json would skip it and
// leave the field as it was (a number, a string, a list, a nested object); a pointer, an interface
// and a type that decodes itself (json.RawMessage) take it.
func TestDecodeStrictNull(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type doc struct {
		N     int             `json:"n"`
		S     string          `json:"s"`
		L     []string        `json:"l"`
		In    inner           `json:"in"`
		P     *int            `json:"p"`
		Any   any             `json:"any"`
		Raw   json.RawMessage `json:"raw"`
		Items []inner         `json:"items"`
	}
	for _, body := range []string{`{"n":null}`, `{"s":null}`, `{"l":null}`, `{"in":null}`, `{"in":{"n":null}}`, `{"items":[{"n":null}]}`} {
		var v doc
		var bad *jsonx.Error
		require.ErrorAs(t, jsonx.DecodeStrict([]byte(body), &v), &bad, body)
		require.Contains(t, bad.Problem, "null", body)
	}
	var v doc
	require.NoError(t, jsonx.DecodeStrict([]byte(`{"p":null,"any":null,"raw":null,"n":1}`), &v))
	require.Equal(t, 1, v.N)
}
