package sagadef_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// FuzzParse: Parse never panics, and a definition it accepts is a document Postgres stores.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"name":"order","steps":[{"name":"charge","connector":"pay.charge","undo":"pay.refund"}]}`,
		`{"name":"o\u0000","steps":[]}`,
		`{"NAME":"o","steps":[]}`,
		`{"name":"o","steps":[{"name":"s","connector":"c","undo":{"connector":"\ud800"}}]}`,
		`{"name":"o","steps":[{"name":"s","connector":"c","undo":"none","timeout_ms":1e1000000}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		def, err := sagadef.Parse(raw)
		if err != nil {
			return
		}
		stored, err := json.Marshal(def)
		require.NoError(t, err)
		require.NoError(t, jsonx.Check(stored), "accepted %q", raw)
	})
}
