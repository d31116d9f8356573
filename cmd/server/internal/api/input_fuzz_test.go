package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/jsonx"
)

// FuzzEnqueueBody: whatever body the boundary (checkRequest, Decode, the request's own checks)
// accepts for POST /v1/effects is storable — every string of the spec is text Postgres takes and
// the args are a jsonb document — and nothing panics on the way. CI runs it for a bounded time.
func FuzzEnqueueBody(f *testing.F) {
	for _, seed := range []string{
		`{"connector":"bank.wire","idempotency_key":"k","args":{"amount":1}}`,
		`{"connector":"c","idempotency_key":"a\u0000b","args":{}}`,
		`{"connector":"c","idempotency_key":"k","args":{"s":"\ud800"}}`,
		"{\"connector\":\"c\",\"idempotency_key\":\"k\",\"args\":{\"s\":\"\xff\xfe\"}}",
		`{"connector":"c","idempotency_key":"k","args":{"n":1e1000000}}`,
		`{"connector":"c","idempotency_key":"k","args":{"n":-1e-1000000}}`,
		`{"CONNECTOR":"c","connector":"d","idempotency_key":"k"}`,
		`{"connector":"c","position":{"turn_group":"g\u0000","decision":0,"call_index":1}}`,
		`{"connector":"c","idempotency_key":"k","run_id":"r","business_key":"\udc00","turn_group":"t"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/effects", strings.NewReader(string(body)))
		r.Pattern = "POST /v1/effects"
		if checkRequest(r, body) != nil {
			return
		}
		var req enqueueRequest
		if (&Call{Request: r, Body: body}).Decode(&req) != nil {
			return
		}
		spec, err := req.spec("acme")
		if err != nil {
			return
		}
		turnGroup := ""
		if spec.Position != nil {
			turnGroup = spec.Position.TurnGroup
		}
		require.NoError(t, jsonx.CheckTexts("connector", spec.Connector, "idempotency_key", spec.IdempotencyKey,
			"business_key", spec.BusinessKey, "run_id", spec.RunID, "turn_group", spec.TurnGroup, "position.turn_group", turnGroup))
		require.NoError(t, jsonx.Check(spec.Args.(json.RawMessage)))
	})
}

// FuzzQuery: any query string either is refused or yields parameters that are text Postgres
// takes.
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{"state=PENDING&limit=10", "connector=%00", "run=%FF", "definition=%C0%AF", "a=%zz", "run=%ED%A0%80"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest("GET", "/v1/effects", nil)
		r.URL.RawQuery = rawQuery
		r.Pattern = "GET /v1/effects"
		if checkRequest(r, nil) != nil {
			return
		}
		for name, values := range r.URL.Query() {
			require.NoError(t, jsonx.CheckText(name))
			for _, v := range values {
				require.NoError(t, jsonx.CheckText(v))
			}
		}
	})
}
