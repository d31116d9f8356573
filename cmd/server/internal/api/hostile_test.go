package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/internal/testkit"
)

// Hostile input: text and JSON that Postgres cannot store. Every class goes to every field of
// every write endpoint; each is refused with 400 naming the field, and no table changes.

// badStrings are JSON string contents Postgres refuses, as they appear between the quotes.
var badStrings = map[string]string{
	"NUL escape":         `a\u0000b`,
	"lone surrogate":     `a\ud800b`,
	"lone low surrogate": `\udc00`,
	"raw bytes FF FE":    "a\xff\xfeb",
	"overlong slash":     "\xc0\xaf",
	"encoded surrogate":  "\xed\xa0\x80",
}

// badNumbers are JSON numbers outside Postgres numeric's range.
var badNumbers = map[string]string{
	"1e1000000":            `1e1000000`,
	"-1e1000000":           `-1e1000000`,
	"1e-1000000":           `1e-1000000`,
	"200,000-digit number": "9" + strings.Repeat("0", 199999),
}

// tableRows counts the rows of every table of the database.
func tableRows(t *testing.T, h *harness) map[string]int {
	t.Helper()
	rows, err := h.pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(tables), 10)
	counts := map[string]int{}
	for _, table := range tables {
		counts[table] = testkit.Count(t, h.pool, `SELECT count(*) FROM `+table)
	}
	return counts
}

func TestHostileInputIsRefusedAtTheBoundary(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", true)
	system := h.systemToken()
	pending := h.enqueue(token, "w-1", 10)
	stuck := h.enqueue(token, "w-2", 20)
	h.makeStuck(stuck.ID)
	before := tableRows(t, h)

	// Each endpoint's body, with %s where a field's value goes: in a string for text fields, bare
	// for documents.
	effectBody := func(rest string) string {
		return `{"connector":"bank.wire","idempotency_key":"k-1","args":{"amount":1}` + rest + `}`
	}
	fields := []hostileField{
		{"POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"%s","args":{}}`, "idempotency_key", false},
		{"POST", "/v1/effects", token, `{"connector":"%s","idempotency_key":"k","args":{}}`, "connector", false},
		{"POST", "/v1/effects", token, effectBody(`,"business_key":"%s"`), "business_key", false},
		{"POST", "/v1/effects", token, effectBody(`,"ordering_key":"%s"`), "ordering_key", false},
		{"POST", "/v1/effects", token, effectBody(`,"run_id":"%s"`), "run_id", false},
		{"POST", "/v1/effects", token, effectBody(`,"turn_group":"%s"`), "turn_group", false},
		{"POST", "/v1/effects", token, `{"connector":"bank.wire","position":{"turn_group":"%s","decision":0,"call_index":0}}`, "position.turn_group", false},
		{"POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"k","args":{"note":%s}}`, "args.note", true},
		{"POST", "/v1/effects/" + stuck.ID.String() + "/resolve", token, `{"to":"FAILED","reason":"%s"}`, "reason", false},
		{"POST", "/v1/effects/" + stuck.ID.String() + "/resolve", token, `{"to":"FAILED","reason":"r","actor":"%s"}`, "actor", false},
		{"POST", "/v1/effects/" + pending.ID.String() + "/cancel", token, `{"reason":"%s"}`, "reason", false},
		{"POST", "/v1/callbacks/c-1", token, `{"error":"%s"}`, "error", false},
		{"POST", "/v1/callbacks/c-1", token, `{"result":{"a":[%s]}}`, "result.a[0]", true},
		{"POST", "/v1/sagas", token, `{"definition":"d","start_key":"%s","input":{}}`, "start_key", false},
		{"POST", "/v1/sagas", token, `{"definition":"d","input":{"x":%s}}`, "input.x", true},
		{"POST", "/v1/sessions/acme:a:b:c/messages", token, `{"message_id":"%s","content":{}}`, "message_id", false},
		{"POST", "/v1/sessions/acme:a:b:c/messages", token, `{"content":{"text":%s}}`, "content.text", true},
		{"POST", "/v1/connectors", system, `{"name":"c","dispatch_url":"http://127.0.0.1:1/%s"}`, "dispatch_url", false},
		{"POST", "/v1/saga-definitions", system, `{"name":"%s","steps":[]}`, "name", false},
		{"PUT", "/v1/turn-handlers/acme", token, `{"url":"http://127.0.0.1:1/%s"}`, "url", false},
		{"PUT", "/v1/connectors/bank.wire/limit", system, `{"rate":1,"reason":"%s"}`, "reason", false},
		{"POST", "/v1/event-subscriptions", token, `{"url":"http://127.0.0.1:1/%s"}`, "url", false},
		{"POST", "/v1/event-subscriptions", token, `{"url":"http://127.0.0.1:1/h","patterns":["%s"]}`, "patterns[0]", false},
		{"POST", "/v1/event-subscriptions", token, `{"url":"http://127.0.0.1:1/h","secret":"%s"}`, "secret", false},
		{"POST", "/v1/event-subscriptions", system, `{"url":"http://127.0.0.1:1/h","tenant":"%s"}`, "tenant", false},
		{"POST", "/v1/event-subscriptions/" + pending.ID.String() + "/pause", token, `{"reason":"%s"}`, "reason", false},
	}
	requireFieldsRefuseHostileValues(t, h, fields)

	// Path values, query values and the Idempotency-Key header.
	for _, tc := range hostileParameters {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" || tc.method == "PUT" {
				body = `{"connector":"bank.wire","idempotency_key":"k-9","args":{}}`
			}
			r := h.do(tc.method, tc.path, token, body, tc.headers...)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			require.Equal(t, tc.code, r.errorCode(t))
		})
	}

	// Field names match exactly; a key given twice is refused.
	for _, body := range []string{
		`{"CONNECTOR":"bank.wire","idempotency_key":"k-2","args":{}}`,
		`{"connector":"bank.wire","Idempotency_Key":"k-2","args":{}}`,
		`{"connector":"x","connector":"bank.wire","idempotency_key":"k-2","args":{}}`,
		`{"connector":"bank.wire","idempotency_key":"k-2","position":{"Turn_Group":"g","decision":0,"call_index":0}}`,
	} {
		r := h.do("POST", "/v1/effects", token, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		require.Equal(t, "invalid_request", r.errorCode(t))
	}
	// A DELETE takes no body, on every route.
	for _, path := range []string{"/v1/turn-handlers/acme", "/v1/connectors/bank.wire", "/v1/connectors/bank.wire/limit", "/v1/event-subscriptions/" + pending.ID.String()} {
		r := h.do("DELETE", path, system, `{"x":1}`)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.body)
	}

	require.Equal(t, before, tableRows(t, h), "nothing written")
	require.Equal(t, "PENDING", h.state(pending.ID))
	require.Equal(t, "STUCK", h.state(stuck.ID))

	// What passes the checks still works: the limits are Postgres's, not tighter.
	r := h.do("POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"café ☕ \ud83d\ude00","args":{"n":1e131071,"s":"\u00e9"}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
}

// Request bodies share MaxBodyBytesInFlight: while one large body is held (here: still being sent),
// a second that would exceed the budget waits; it goes through once the first request ends.
func TestBodiesShareTheInFlightBudget(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	const size = 600_000
	h.serve(&api.Config{Pool: h.pool, Effects: h.client, MaxBodyBytes: 1 << 20, MaxBodyBytesInFlight: 1 << 20})
	body := func(key string) string {
		prefix := `{"connector":"bank.wire","idempotency_key":"` + key + `","args":{"pad":"`
		return prefix + strings.Repeat("x", size-len(prefix)-4) + `"}}`
	}

	// The first request sends its headers and half its body, then waits.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	first := body("big-1")
	_, err = fmt.Fprintf(conn, "POST /v1/effects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		token, len(first), first[:size/2])
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the server has read the headers and holds the first share

	send := func(key string, timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/effects", strings.NewReader(body(key)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	_, err = send("big-2", time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second body waited for the first")

	_, err = conn.Write([]byte(first[size/2:]))
	require.NoError(t, err)
	status, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status.StatusCode)
	status.Body.Close()

	code, err := send("big-3", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'big-%'`))
}

// hostileField is a field of an endpoint's body: the request, with %s where the field's value goes
// (in a string for text fields, bare for documents), and the field's name in the error.
type hostileField struct {
	method, path, token, body, name string
	document                        bool
}

// requireFieldsRefuseHostileValues: every bad string (and, in a document, every bad number) in
// each field is refused with 400 invalid_request naming the field.
func requireFieldsRefuseHostileValues(t *testing.T, h *harness, fields []hostileField) {
	t.Helper()
	for _, f := range fields {
		values := map[string]string{}
		for class, s := range badStrings {
			if f.document {
				values[class] = `"` + s + `"`
			} else {
				values[class] = s
			}
		}
		if f.document {
			for class, n := range badNumbers {
				values[class] = n
			}
		}
		for class, value := range values {
			t.Run(f.method+" "+f.path+" "+f.name+" "+class, func(t *testing.T) {
				r := h.do(f.method, f.path, f.token, strings.Replace(f.body, "%s", value, 1), "Idempotency-Key", "hostile-"+f.name+class)
				require.Equal(t, http.StatusBadRequest, r.status, "%.300s", r.body)
				require.Equal(t, "invalid_request", r.errorCode(t))
				require.Contains(t, string(r.body), `field \"`+f.name+`\"`)
			})
		}
	}
}

// hostileParameters are bad path values, query values and headers, each with the error code that
// refuses it.
var hostileParameters = []struct {
	name, method, path string
	headers            []string
	code               string
}{
	{"run id NUL", "GET", "/v1/runs/a%00b", nil, "invalid_parameter"},
	{"run id FF", "GET", "/v1/runs/%FF", nil, "invalid_parameter"},
	{"connector name overlong", "GET", "/v1/connectors/%C0%AF", nil, "invalid_parameter"},
	{"connector delete surrogate", "DELETE", "/v1/connectors/%ED%A0%80", nil, "invalid_parameter"},
	{"saga definition NUL", "GET", "/v1/saga-definitions/x%00", nil, "invalid_parameter"},
	{"callback id NUL", "POST", "/v1/callbacks/a%00b", nil, "invalid_parameter"},
	{"callback id FF", "POST", "/v1/callbacks/%FF", nil, "invalid_parameter"},
	{"session key NUL", "GET", "/v1/sessions/acme%00:a:b:c/turns", nil, "invalid_parameter"},
	{"session key FF", "POST", "/v1/sessions/acme:%FF:b:c/messages", nil, "invalid_parameter"},
	{"turn handler FF", "PUT", "/v1/turn-handlers/%FF", nil, "invalid_parameter"},
	{"turn handler delete NUL", "DELETE", "/v1/turn-handlers/a%00", nil, "invalid_parameter"},
	{"limit NUL", "GET", "/v1/connectors/a%00/limit", nil, "invalid_parameter"},
	{"limit set FF", "PUT", "/v1/connectors/%FF/limit", nil, "invalid_parameter"},
	{"limit clear surrogate", "DELETE", "/v1/connectors/%ED%A0%80/limit", nil, "invalid_parameter"},
	{"limit reset overlong", "POST", "/v1/connectors/%C0%AF/limit/reset", nil, "invalid_parameter"},
	{"connector filter NUL", "GET", "/v1/effects?connector=%00", nil, "invalid_parameter"},
	{"run filter FF", "GET", "/v1/effects?run=%FF", nil, "invalid_parameter"},
	{"definition filter overlong", "GET", "/v1/sagas?definition=%C0%AF", nil, "invalid_parameter"},
	{"bad query escape", "GET", "/v1/effects?run=%zz", nil, "invalid_parameter"},
	{"event pattern NUL", "GET", "/v1/events?pattern=turn.%00", nil, "invalid_parameter"},
	{"event pattern overlong", "GET", "/v1/events?pattern=%C0%AF", nil, "invalid_parameter"},
	{"event after FF", "GET", "/v1/events?after=%FF", nil, "invalid_parameter"},
	{"event tenant surrogate", "GET", "/v1/events?tenant=%ED%A0%80", nil, "invalid_parameter"},
	{"latin-1 Last-Event-ID", "GET", "/v1/events", []string{"Last-Event-ID", "caf\xe9"}, "invalid_parameter"},
	{"subscription id NUL", "GET", "/v1/event-subscriptions/a%00b", nil, "invalid_parameter"},
	{"subscription pause FF", "POST", "/v1/event-subscriptions/%FF/pause", nil, "invalid_parameter"},
	{"subscription limit", "GET", "/v1/event-subscriptions?limit=0", nil, "invalid_parameter"},
	{"latin-1 Idempotency-Key", "POST", "/v1/effects", []string{"Idempotency-Key", "caf\xe9"}, "invalid_idempotency_key"},
	{"Idempotency-Key with a control character", "POST", "/v1/effects", []string{"Idempotency-Key", "a\tb"}, "invalid_idempotency_key"},
}
