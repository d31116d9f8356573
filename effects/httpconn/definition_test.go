package httpconn_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// TestValidate applies the registration rules of Go connectors plus the HTTP ones.
func TestValidate(t *testing.T) {
	t.Parallel()
	write := []effects.Tag{effects.TagWrite, effects.TagExternal}
	ok := func(d httpconn.Definition) httpconn.Definition { return d }
	base := httpconn.Definition{Name: "bank.wire", Tags: write, DispatchURL: "https://bank.example/wires", StatusURL: "https://bank.example/status"}
	with := func(change func(*httpconn.Definition)) httpconn.Definition {
		d := base
		change(&d)
		return d
	}
	cases := []struct {
		name string
		def  httpconn.Definition
		want string // "" for valid
	}{
		{"write with status check", ok(base), ""},
		{"idempotent write without status check", with(func(d *httpconn.Definition) {
			d.StatusURL, d.Tags = "", []effects.Tag{effects.TagWrite, effects.TagIdempotent}
		}), ""},
		{"read", with(func(d *httpconn.Definition) { d.StatusURL, d.Tags = "", []effects.Tag{effects.TagRead} }), ""},
		{"write with compensation only", with(func(d *httpconn.Definition) { d.StatusURL, d.CompensateURL = "", "http://127.0.0.1:9/undo" }), ""},
		{"write with business key only", with(func(d *httpconn.Definition) { d.StatusURL, d.BusinessKeyFields = "", []string{"account"} }), ""},
		{"unsafe write", with(func(d *httpconn.Definition) { d.StatusURL, d.Unsafe = "", true }), ""},
		{"write with no way to resolve UNKNOWN", with(func(d *httpconn.Definition) { d.StatusURL = "" }), "not retry safe"},
		{"no tags and nothing else", with(func(d *httpconn.Definition) { d.StatusURL, d.Tags = "", nil }), "not retry safe"},
		{"destructive idempotent", with(func(d *httpconn.Definition) {
			d.StatusURL, d.Tags = "", []effects.Tag{effects.TagDestructive, effects.TagIdempotent}
		}), "not retry safe"},
		{"unknown tag", with(func(d *httpconn.Definition) { d.Tags = []effects.Tag{"teleport"} }), `unknown tag "teleport"`},
		{"no name", with(func(d *httpconn.Definition) { d.Name = "" }), "name is required"},
		{"name with a space", with(func(d *httpconn.Definition) { d.Name = "bank wire" }), "use letters, digits"},
		{"no dispatch URL", with(func(d *httpconn.Definition) { d.DispatchURL = "" }), "dispatch_url is required"},
		{"relative URL", with(func(d *httpconn.Definition) { d.DispatchURL = "/wires" }), "absolute http or https"},
		{"ftp URL", with(func(d *httpconn.Definition) { d.StatusURL = "ftp://bank/status" }), "status_url"},
		{"URL without host", with(func(d *httpconn.Definition) { d.CompensateURL = "http:///x" }), "has no host"},
		{"URL with fragment", with(func(d *httpconn.Definition) { d.DispatchURL = "http://bank/w#x" }), "fragment"},
		{"timeout too long", with(func(d *httpconn.Definition) { d.Timeout = time.Hour }), "out of range"},
		{"negative attempts", with(func(d *httpconn.Definition) { d.MaxAttempts = -1 }), "MaxAttempts must be positive"},
		{"too many attempts", with(func(d *httpconn.Definition) { d.MaxAttempts = 1001 }), "max_attempts 1001: at most 1000"},
		{"huge status check limit", with(func(d *httpconn.Definition) { d.StatusCheckLimit = 1 << 40 }), "status_check_limit"},
		{"negative status check limit", with(func(d *httpconn.Definition) { d.StatusCheckLimit = -2 }), "StatusCheckLimit must be positive"},
		{"backoff max below initial", with(func(d *httpconn.Definition) { d.BackoffInitial, d.BackoffMax = time.Minute, time.Second }), "backoff"},
		{"empty business key field", with(func(d *httpconn.Definition) { d.BusinessKeyFields = []string{""} }), "is empty"},
		{"repeated business key field", with(func(d *httpconn.Definition) { d.BusinessKeyFields = []string{"a", "a"} }), "appears twice"},
		{"business key field too long", with(func(d *httpconn.Definition) { d.BusinessKeyFields = []string{strings.Repeat("f", 201)} }), "business_key_fields[0] is longer than 200 bytes"},
		{"64 business key fields", with(func(d *httpconn.Definition) { d.BusinessKeyFields = distinctFields(64) }), ""},
		{"65 business key fields", with(func(d *httpconn.Definition) { d.BusinessKeyFields = distinctFields(65) }), "business_key_fields: 65 given, at most 64"},
		{"repeated ordering key field", with(func(d *httpconn.Definition) { d.OrderingKeyFields = []string{"order", "order"} }), "ordering_key_fields: \"order\" appears twice"},
		{"65 ordering key fields", with(func(d *httpconn.Definition) { d.OrderingKeyFields = distinctFields(65) }), "ordering_key_fields: 65 given, at most 64"},
		{"16 tags", with(func(d *httpconn.Definition) { d.Tags = slices.Repeat(write, 8) }), ""},
		{"17 tags", with(func(d *httpconn.Definition) { d.Tags = append(slices.Repeat(write, 8), effects.TagWrite) }), "tags: 17 given, at most 16"},
		{"async: hard timeout with a cancel URL", with(func(d *httpconn.Definition) {
			d.AsyncTimeout, d.HardTimeout, d.CancelURL = time.Minute, true, "https://bank.example/cancel"
		}), ""},
		{"async timeout of 7 days", with(func(d *httpconn.Definition) { d.AsyncTimeout = effects.MaxAsyncTimeout }), ""},
		{"async timeout over 7 days", with(func(d *httpconn.Definition) { d.AsyncTimeout = effects.MaxAsyncTimeout + time.Millisecond }), "async_timeout_ms"},
		{"negative async timeout", with(func(d *httpconn.Definition) { d.AsyncTimeout = -time.Second }), "async_timeout_ms"},
		{"async timeout under 1ms", with(func(d *httpconn.Definition) { d.AsyncTimeout = time.Microsecond }), "async_timeout_ms"},
		{"relative cancel URL", with(func(d *httpconn.Definition) { d.CancelURL = "/cancel" }), "cancel_url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.def.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, httpconn.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// distinctFields is n distinct business key fields.
func distinctFields(n int) []string {
	fields := make([]string, n)
	for i := range fields {
		fields[i] = strconv.Itoa(i)
	}
	return fields
}

// TestValidateRefusesHugeLists: a definition with 100,000 business key fields or tags (a body of
// 680 KB, under the API's 1 MiB limit) is refused by the length of the list, naming the field,
// with a short message: its entries are not checked (nor reported) one by one. Before the bound,
// 100,000 distinct fields took half a minute to check.
func TestValidateRefusesHugeLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field string
		value any
		want  string
	}{
		{"business_key_fields", distinctFields(100_000), "business_key_fields: 100000 given, at most 64"},
		{"business_key_fields", slices.Repeat([]string{"same"}, 100_000), "business_key_fields: 100000 given, at most 64"},
		{"tags", slices.Repeat([]string{"write"}, 100_000), "tags: 100000 given, at most 16"},
	} {
		body, err := json.Marshal(map[string]any{
			"name": "bank.wire", "tags": []string{"write"}, "dispatch_url": "http://127.0.0.1:1/d",
			"status_url": "http://127.0.0.1:1/s", tc.field: tc.value,
		})
		require.NoError(t, err)
		require.Less(t, len(body), 1<<20, "fits the API's body limit")
		var def httpconn.Definition
		require.NoError(t, json.Unmarshal(body, &def))
		err = def.Validate()
		require.ErrorIs(t, err, httpconn.ErrInvalid)
		require.ErrorContains(t, err, tc.want)
		require.Less(t, len(err.Error()), 200, "one problem, not one per entry")
	}
}

// BenchmarkValidateBusinessKeyFields: checking the business key fields is linear, and a list over
// the bound is refused by its length: fields=100000 costs a copy of the list (WithDefaults), a few
// milliseconds, where the search per field took half a minute.
func BenchmarkValidateBusinessKeyFields(b *testing.B) {
	for _, n := range []int{8, httpconn.MaxBusinessKeyFields, 100_000} {
		def := httpconn.Definition{
			Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite}, DispatchURL: "http://127.0.0.1:1/d",
			BusinessKeyFields: distinctFields(n),
		}
		b.Run(fmt.Sprintf("fields=%d", n), func(b *testing.B) {
			for b.Loop() {
				_ = def.Validate()
			}
		})
	}
}

// TestValidateSameRulesAsRegistry: a definition is valid exactly when the registry accepts its
// connector (for the rules the two share).
func TestValidateSameRulesAsRegistry(t *testing.T) {
	t.Parallel()
	tagSets := [][]effects.Tag{nil, {effects.TagRead}, {effects.TagWrite}, {effects.TagWrite, effects.TagIdempotent},
		{effects.TagDestructive, effects.TagIdempotent}, {effects.TagRead, effects.TagWrite}}
	for _, tags := range tagSets {
		for _, status := range []string{"", "http://127.0.0.1:1/s"} {
			for _, unsafe := range []bool{false, true} {
				def := httpconn.Definition{Name: "c", Tags: tags, DispatchURL: "http://127.0.0.1:1/d", StatusURL: status, Unsafe: unsafe}
				registryErr := effects.NewRegistry().Register(def.Connector(nil))
				require.Equal(t, registryErr == nil, def.Validate() == nil, "tags %v status %q unsafe %v: registry says %v", tags, status, unsafe, registryErr)
			}
		}
	}
}

// TestDefinitionJSON: the JSON form round-trips, uses milliseconds, and refuses unknown fields.
func TestDefinitionJSON(t *testing.T) {
	t.Parallel()
	def := httpconn.Definition{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite}, DispatchURL: "http://b/w", StatusURL: "http://b/s",
		BusinessKeyFields: []string{"account"}, Timeout: 1500 * time.Millisecond, MaxAttempts: 3, StatusCheckLimit: 2,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: time.Second, Unsafe: true,
		AsyncTimeout: 90 * time.Second, HardTimeout: true, CancelURL: "http://b/c",
	}
	raw, err := json.Marshal(def)
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"bank.wire","tags":["write"],"dispatch_url":"http://b/w","status_url":"http://b/s",
		"business_key_fields":["account"],"timeout_ms":1500,"max_attempts":3,"status_check_limit":2,
		"backoff_initial_ms":10,"backoff_max_ms":1000,"unsafe":true,
		"async_timeout_ms":90000,"hard_timeout":true,"cancel_url":"http://b/c"}`, string(raw))
	var back httpconn.Definition
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, def, back)

	// Without async settings: none written, none read (the reactor's timeout, soft, no cancel).
	def.AsyncTimeout, def.HardTimeout, def.CancelURL = 0, false, ""
	raw, err = json.Marshal(def)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "async_timeout_ms")
	require.NotContains(t, string(raw), "hard_timeout")
	require.NotContains(t, string(raw), "cancel_url")
	back = httpconn.Definition{}
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, def, back)

	// Out-of-range and mistyped async settings are refused, naming the field.
	for body, want := range map[string]string{
		`{"name":"x","async_timeout_ms":0}`:         "async_timeout_ms 0 out of range",
		`{"name":"x","async_timeout_ms":-1}`:        "async_timeout_ms -1 out of range",
		`{"name":"x","async_timeout_ms":604800001}`: "async_timeout_ms 604800001 out of range",
		`{"name":"x","async_timeout_ms":1e30}`:      "async_timeout_ms",
		`{"name":"x","async_timeout_ms":1.5}`:       "async_timeout_ms",
		`{"name":"x","async_timeout_ms":"10s"}`:     "async_timeout_ms",
		`{"name":"x","hard_timeout":"yes"}`:         "hard_timeout",
		`{"name":"x","cancel_url":["http://b/c"]}`:  "cancel_url",
		`{"name":"x","async_hard_timeout":true}`:    "async_hard_timeout", // an effect's field, not a connector's
	} {
		err := json.Unmarshal([]byte(body), &back)
		require.ErrorIs(t, err, httpconn.ErrInvalid, body)
		require.ErrorContains(t, err, want, body)
	}
	require.NoError(t, json.Unmarshal([]byte(`{"name":"x","async_timeout_ms":604800000}`), &back))
	require.Equal(t, effects.MaxAsyncTimeout, back.AsyncTimeout)

	err = json.Unmarshal([]byte(`{"name":"x","dispatch_url":"http://b","status_ur":"http://b/s"}`), &back)
	require.ErrorIs(t, err, httpconn.ErrInvalid)
	require.ErrorContains(t, err, "status_ur")
	err = json.Unmarshal([]byte(`{"name":"x","timeout_ms":-5}`), &back)
	require.ErrorContains(t, err, "timeout_ms -5 out of range")
	err = json.Unmarshal([]byte(`{"name":"x","tags":"write"}`), &back)
	require.ErrorIs(t, err, httpconn.ErrInvalid)
}

// The confirmation hold of an HTTP connector: its JSON fields, its prompt checked by
// effects.ValidateConfirmationPrompt (named confirmation_prompt), and its mapping onto
// effects.Connector, whose effects are then held with the prompt rendered. The store refuses it
// until reckon_connectors can hold it, rather than drop it.
func TestDefinitionConfirmation(t *testing.T) {
	t.Parallel()
	raw := `{"name":"bank.refund","tags":["write"],"dispatch_url":"http://127.0.0.1:1/refunds","status_url":"http://127.0.0.1:1/status",
		"requires_confirmation":true,"confirmation_prompt":"Refund ${amount} for order {order_id}?"}`
	var def httpconn.Definition
	require.NoError(t, json.Unmarshal([]byte(raw), &def))
	require.True(t, def.RequiresConfirmation)
	require.Equal(t, "Refund ${amount} for order {order_id}?", def.ConfirmationPrompt)
	require.NoError(t, def.Validate())
	out, err := json.Marshal(def)
	require.NoError(t, err)
	require.Contains(t, string(out), `"requires_confirmation":true,"confirmation_prompt":"Refund ${amount} for order {order_id}?"`)
	plain, err := json.Marshal(httpconn.Definition{Name: "x", DispatchURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NotContains(t, string(plain), "confirmation", "left out when unset")
	var typo httpconn.Definition
	require.ErrorIs(t, json.Unmarshal([]byte(`{"name":"x","dispatch_url":"http://127.0.0.1:1","requires_confirmation":"yes"}`), &typo), httpconn.ErrInvalid)

	connector := def.Connector(nil)
	require.True(t, connector.RequiresConfirmation)
	require.Equal(t, def.ConfirmationPrompt, connector.ConfirmationPrompt)

	for prompt, want := range map[string]string{
		"Refund {order id}?":      "a brace that is not part of a {name} placeholder",
		"Refund {amount":          "a brace that is not part of a {name} placeholder",
		"Refund {1st}?":           "a brace that is not part of a {name} placeholder",
		"Refund}":                 "a brace that is not part of a {name} placeholder",
		"Refund\x00?":             "NUL",
		"Refund \xff?":            "UTF-8",
		strings.Repeat("r", 2001): "2001 bytes, at most 2000",
	} {
		bad := def
		bad.ConfirmationPrompt = prompt
		err := bad.Validate()
		require.ErrorIs(t, err, httpconn.ErrInvalid, "%q", prompt)
		require.ErrorContains(t, err, "confirmation_prompt: ", "%q", prompt)
		require.ErrorContains(t, err, want, "%q", prompt)
	}
}
