package httpconn_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/openapitest"
)

// recorded is one request an upstream received.
type recorded struct {
	path   string
	header http.Header
	body   httpconn.Request
}

// upstream is a real HTTP server on 127.0.0.1 whose answer is the handler the test sets, and which
// records every request.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
	handler  http.HandlerFunc
}

// newUpstream starts an upstream whose exchanges are held to the connector wire protocol's
// OpenAPI document (upstreamDocument).
func newUpstream(t *testing.T, handler http.HandlerFunc) *upstream {
	u := &upstream{handler: handler}
	u.Server = httptest.NewServer(upstreamDocument(t, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body httpconn.Request
		_ = json.Unmarshal(raw, &body)
		u.mu.Lock()
		u.requests = append(u.requests, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body})
		handler := u.handler
		u.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) received() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.requests...)
}

func answer(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// offProtocol is h answering outside the wire protocol on purpose (a body that is not JSON, an
// unknown status): the connector document does not describe it.
func offProtocol(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		openapitest.OffProtocol(r)
		h(w, r)
	}
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// truncated promises 100 bytes of JSON and sends 10, then closes.
func truncated(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"wire_id\"")
	_ = buf.Flush()
	_ = conn.Close()
}

// testEffectID is the effect of testCall.
var testEffectID = uuid.New()

func testCall() effects.Call {
	return effects.Call{
		EffectID: testEffectID, CorrelationID: "run-1:" + testEffectID.String(), TenantID: "t1", Connector: "bank.wire", IdempotencyKey: "run-1/d-0/bank.wire/0",
		BusinessKey: "acc-1:100", Args: json.RawMessage(`{"account":"acc-1","amount":100}`), Attempt: 2,
	}
}

func definition(base string) httpconn.Definition {
	return httpconn.Definition{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		DispatchURL: base + "/dispatch", StatusURL: base + "/status", CompensateURL: base + "/compensate",
		Timeout: 2 * time.Second,
	}
}

// outcomeOf names the effects outcome an error leads to.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "CONFIRMED"
	case effects.IsAccepted(err):
		var accepted *effects.AcceptedError
		errors.As(err, &accepted)
		return "ACCEPTED " + accepted.CorrelationID
	case effects.IsPermanent(err):
		return "FAILED"
	case effects.IsRetryable(err):
		return "RETRY"
	default:
		return "UNKNOWN"
	}
}

// TestDispatchRequest checks the request of the wire protocol: method, headers and body.
func TestDispatchRequest(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, answer(http.StatusOK, nil, `{"wire_id":"w-1"}`))
	connector := definition(up.URL).Connector(nil)
	call := testCall()
	result, err := connector.Dispatch(context.Background(), call)
	require.NoError(t, err)
	require.JSONEq(t, `{"wire_id":"w-1"}`, string(result))

	got := up.received()
	require.Len(t, got, 1)
	require.Equal(t, "/dispatch", got[0].path)
	require.Equal(t, call.IdempotencyKey, got[0].header.Get("Idempotency-Key"))
	require.Equal(t, call.EffectID.String(), got[0].header.Get("Reckon-Effect-Id"))
	require.Equal(t, "2", got[0].header.Get("Reckon-Attempt"))
	require.Equal(t, call.CorrelationID, got[0].header.Get("Reckon-Correlation-Id"))
	require.Equal(t, "application/json", got[0].header.Get("Content-Type"))
	body := got[0].body
	require.Equal(t, call.EffectID, body.EffectID)
	require.Equal(t, call.IdempotencyKey, body.IdempotencyKey)
	require.NotNil(t, body.BusinessKey)
	require.Equal(t, "acc-1:100", *body.BusinessKey)
	require.JSONEq(t, string(call.Args), string(body.Args))
	require.Equal(t, 2, body.Attempt)
	require.Equal(t, call.CorrelationID, body.CorrelationID)
	require.Nil(t, body.Original)
}

// TestDispatchOutcomes maps every class of answer of the wire protocol table to its outcome.
func TestDispatchOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		outcome string
		after   time.Duration // for RETRY: the Retry-After honoured
		contain string
	}{
		{"200 with JSON", answer(200, nil, `{"ok":true}`), "CONFIRMED", 0, ""},
		{"201 with JSON", answer(201, nil, `{"id":"x"}`), "CONFIRMED", 0, ""},
		{"200 with invalid JSON", offProtocol(answer(200, nil, `{"ok":`)), "UNKNOWN", 0, "truncated or invalid JSON"},
		{"200 with empty body", offProtocol(answer(200, nil, ``)), "UNKNOWN", 0, "truncated or invalid JSON"},
		{"200 truncated mid-body", truncated, "UNKNOWN", 0, "body was cut"},
		{"202 accepted with its own id", answer(202, nil, `{"correlation_id":"r:1"}`), "ACCEPTED r:1", 0, ""},
		{"202 accepted, empty body", answer(202, nil, ``), "ACCEPTED run-1:" + testEffectID.String(), 0, ""},
		{"202 accepted, body without id", answer(202, nil, `{"status":"queued"}`), "ACCEPTED run-1:" + testEffectID.String(), 0, ""},
		{"202 with invalid JSON", offProtocol(answer(202, nil, `{"corr`)), "UNKNOWN", 0, "invalid JSON body"},
		{"204 no content", answer(204, nil, ``), "UNKNOWN", 0, "outcome unknown"},
		{"400", answer(400, nil, `{"error":"bad account"}`), "FAILED", 0, "bad account"},
		{"404", answer(404, nil, ``), "FAILED", 0, "404"},
		{"409", answer(409, nil, `{"error":"conflict"}`), "FAILED", 0, "409"},
		{"422", answer(422, nil, ``), "FAILED", 0, "422"},
		{"408 is not a rejection", answer(408, nil, ``), "UNKNOWN", 0, "408"},
		{"425 too early", answer(425, nil, ``), "RETRY", 0, "425"},
		{"429 with Retry-After", answer(429, map[string]string{"Retry-After": "7"}, ``), "RETRY", 7 * time.Second, "429"},
		{"429 without Retry-After", answer(429, nil, ``), "RETRY", 0, "429"},
		{"429 with a past HTTP date", answer(429, map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, ``), "RETRY", 0, "429"},
		{"429 with a huge Retry-After", answer(429, map[string]string{"Retry-After": "999999"}, ``), "RETRY", time.Hour, "429"},
		{"503 with Retry-After", answer(503, map[string]string{"Retry-After": "3"}, ``), "RETRY", 3 * time.Second, "503"},
		{"503 without Retry-After", answer(503, nil, ``), "UNKNOWN", 0, "without Retry-After"},
		{"500", answer(500, nil, `boom`), "UNKNOWN", 0, "boom"},
		{"502", answer(502, nil, ``), "UNKNOWN", 0, "502"},
		{"redirect is not followed", answer(307, map[string]string{"Location": "/elsewhere"}, ``), "UNKNOWN", 0, "307"},
		{"dropped connection", drop, "UNKNOWN", 0, "outcome unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, tc.handler)
			_, err := definition(up.URL).Connector(nil).Dispatch(context.Background(), testCall())
			require.Equal(t, tc.outcome, outcomeOf(err), "error: %v", err)
			if tc.contain != "" {
				require.ErrorContains(t, err, tc.contain)
			}
			var retry *effects.RetryableError
			if errors.As(err, &retry) {
				require.Equal(t, tc.after, retry.After)
			}
			require.Len(t, up.received(), 1, "exactly one request per call")
		})
	}
}

// TestDispatchTimeout: an upstream that does not answer within the timeout leaves the outcome
// unknown.
func TestDispatchTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	def := definition(up.URL)
	def.Timeout = 100 * time.Millisecond
	connector := def.Connector(nil)
	ctx, cancel := context.WithTimeout(context.Background(), connector.Timeout) // as the reactor does
	defer cancel()
	_, err := connector.Dispatch(ctx, testCall())
	require.Equal(t, "UNKNOWN", outcomeOf(err), "error: %v", err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestDispatchConnectionRefused: nothing listens, so nothing was applied: retryable.
func TestDispatchConnectionRefused(t *testing.T) {
	t.Parallel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := listener.Addr().String()
	require.NoError(t, listener.Close())
	_, err = definition("http://"+addr).Connector(nil).Dispatch(context.Background(), testCall())
	require.Equal(t, "RETRY", outcomeOf(err), "error: %v", err)
	require.ErrorContains(t, err, "nothing sent")
}

// TestDispatchNoReplayOnReusedConnection: net/http replays a request with an Idempotency-Key
// header when a reused keep-alive connection breaks; the connector forbids that, so a dropped
// call is one request and UNKNOWN.
func TestDispatchNoReplayOnReusedConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			answer(200, nil, `{}`)(w, r)
			return
		}
		drop(w, r)
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	connector := definition(up.URL).Connector(client)
	_, err := connector.Dispatch(context.Background(), testCall())
	require.NoError(t, err)
	_, err = connector.Dispatch(context.Background(), testCall())
	require.Equal(t, "UNKNOWN", outcomeOf(err), "error: %v", err)
	require.Len(t, up.received(), 2, "the dropped request was not sent again")
}

// TestStatusCheck maps status check answers; anything unexpected is inconclusive.
func TestStatusCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    effects.Status
	}{
		{"present", answer(200, nil, `{"status":"present","result":{"wire_id":"w-1"}}`), effects.Present(json.RawMessage(`{"wire_id":"w-1"}`))},
		{"absent", answer(200, nil, `{"status":"absent"}`), effects.Absent()},
		{"duplicate", answer(200, nil, `{"status":"duplicate","count":3,"result":{"wire_id":"w-1"}}`), effects.Duplicate(3, json.RawMessage(`{"wire_id":"w-1"}`))},
		{"inconclusive", answer(200, nil, `{"status":"inconclusive"}`), effects.Status{Kind: effects.StatusInconclusive}},
		{"unknown status", offProtocol(answer(200, nil, `{"status":"maybe"}`)), effects.Status{Kind: effects.StatusInconclusive}},
		{"not JSON", offProtocol(answer(200, nil, `present`)), effects.Status{Kind: effects.StatusInconclusive}},
		{"500", answer(500, nil, `{"status":"absent"}`), effects.Status{Kind: effects.StatusInconclusive}},
		{"404", answer(404, nil, ``), effects.Status{Kind: effects.StatusInconclusive}},
		{"dropped", drop, effects.Status{Kind: effects.StatusInconclusive}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, tc.handler)
			connector := definition(up.URL).Connector(nil)
			call := testCall()
			status, err := connector.StatusCheck(context.Background(), call)
			require.NoError(t, err)
			require.Equal(t, tc.want.Kind, status.Kind, "reason: %s", status.Reason)
			require.Equal(t, tc.want.Count, status.Count)
			if tc.want.Result != nil {
				require.JSONEq(t, string(tc.want.Result), string(status.Result))
			}
			if tc.want.Kind == effects.StatusInconclusive {
				require.NotEmpty(t, status.Reason)
			}
			got := up.received()
			require.Len(t, got, 1)
			require.Equal(t, "/status", got[0].path)
			require.Equal(t, call.IdempotencyKey, got[0].header.Get("Idempotency-Key"))
			require.Equal(t, call.EffectID, got[0].body.EffectID)
		})
	}
}

// TestCompensateRequest: a compensation carries its own key and the original effect, and its
// answer is classified like a dispatch.
func TestCompensateRequest(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, answer(201, nil, `{"reversal_id":"r-1"}`))
	connector := definition(up.URL).Connector(nil)
	call := testCall()
	call.IdempotencyKey = "comp-key"
	original := effects.Original{EffectID: uuid.New(), IdempotencyKey: "orig-key", Result: json.RawMessage(`{"wire_id":"w-1"}`)}
	result, err := connector.Compensate(context.Background(), call, original)
	require.NoError(t, err)
	require.JSONEq(t, `{"reversal_id":"r-1"}`, string(result))
	got := up.received()
	require.Len(t, got, 1)
	require.Equal(t, "/compensate", got[0].path)
	require.Equal(t, "comp-key", got[0].header.Get("Idempotency-Key"))
	require.NotNil(t, got[0].body.Original)
	require.Equal(t, original.EffectID, got[0].body.Original.EffectID)
	require.JSONEq(t, `{"wire_id":"w-1"}`, string(got[0].body.Original.Result))

	up.mu.Lock()
	up.handler = answer(400, nil, `{"error":"already reversed"}`)
	up.mu.Unlock()
	_, err = connector.Compensate(context.Background(), call, original)
	require.Equal(t, "FAILED", outcomeOf(err))
}

// TestCancelRequest: a cancel is a POST to cancel_url with the dispatch's headers and body
// (correlation id included); only 200, 201 or 204 says the upstream abandoned the operation, and
// every other answer, a timeout or a dropped connection is an error (the outcome stays unknown).
func TestCancelRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		handler   http.HandlerFunc
		cancelled bool
	}{
		{"200", answer(http.StatusOK, nil, `{"cancelled":true}`), true},
		{"201 without a body", answer(http.StatusCreated, nil, ``), true},
		{"204", answer(http.StatusNoContent, nil, ``), true},
		{"202: will try", answer(http.StatusAccepted, nil, `{}`), false},
		{"409: too late", answer(http.StatusConflict, nil, `{"error":"already done"}`), false},
		{"404", answer(http.StatusNotFound, nil, ``), false},
		{"500", answer(http.StatusInternalServerError, nil, ``), false},
		{"503 with Retry-After", answer(http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"}, ``), false},
		{"dropped", drop, false},
		{"timeout", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t, tc.handler)
			def := definition(up.URL)
			def.CancelURL = up.URL + "/cancel"
			connector := def.Connector(nil)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := connector.Cancel(ctx, testCall())
			if tc.cancelled {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.False(t, effects.IsPermanent(err) || effects.IsRetryable(err), "a failed cancel is not an outcome: %v", err)
			}
			got := up.received()
			require.Len(t, got, 1, "one request, never replayed")
			require.Equal(t, "/cancel", got[0].path)
			call := testCall()
			require.Equal(t, call.IdempotencyKey, got[0].header.Get(httpconn.HeaderIdempotencyKey))
			require.Equal(t, call.EffectID.String(), got[0].header.Get(httpconn.HeaderEffectID))
			require.Equal(t, call.CorrelationID, got[0].header.Get(httpconn.HeaderCorrelationID))
			require.Equal(t, call.CorrelationID, got[0].body.CorrelationID)
			require.Equal(t, call.EffectID, got[0].body.EffectID)
		})
	}
}

// TestConnectorCapabilities: the connector has a status check, compensation and business key only
// when the definition gives their URLs or fields.
func TestConnectorCapabilities(t *testing.T) {
	t.Parallel()
	bare := httpconn.Definition{Name: "x", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, DispatchURL: "http://127.0.0.1:1/d"}.Connector(nil)
	require.NotNil(t, bare.Dispatch)
	require.Nil(t, bare.StatusCheck)
	require.Nil(t, bare.Compensate)
	require.Nil(t, bare.Cancel)
	require.Nil(t, bare.BusinessKey)
	require.Nil(t, bare.OrderingKey)
	require.Zero(t, bare.AsyncTimeout, "the client's default")
	require.False(t, bare.HardTimeout)
	require.Equal(t, effects.PolicyIdempotent, effects.PolicyOf(&bare))

	full := definition("http://127.0.0.1:1")
	full.BusinessKeyFields = []string{"account", "amount"}
	full.AsyncTimeout, full.HardTimeout, full.CancelURL = time.Minute, true, "http://127.0.0.1:1/cancel"
	c := full.Connector(nil)
	require.NotNil(t, c.StatusCheck)
	require.NotNil(t, c.Compensate)
	require.NotNil(t, c.Cancel)
	require.Equal(t, time.Minute, c.AsyncTimeout)
	require.True(t, c.HardTimeout)
	require.Equal(t, effects.PolicyCompensatable, effects.PolicyOf(&c))
	key, err := c.BusinessKey(json.RawMessage(`{"account":"acc-1","amount":100,"memo":"x"}`))
	require.NoError(t, err)
	require.Equal(t, "acc-1:100", key)
	_, err = c.BusinessKey(json.RawMessage(`{"account":"acc-1"}`))
	require.ErrorContains(t, err, `no field "amount"`)
	_, err = c.BusinessKey(json.RawMessage(`{"account":{"id":1},"amount":1}`))
	require.ErrorContains(t, err, "string, number or boolean")
	_, err = c.BusinessKey(json.RawMessage(`[1]`))
	require.ErrorContains(t, err, "JSON object")
	full.OrderingKeyFields = []string{"account"}
	c = full.Connector(nil)
	key, err = c.OrderingKey(json.RawMessage(`{"account":"acc-1","amount":100}`))
	require.NoError(t, err)
	require.Equal(t, "acc-1", key)
	_, err = c.OrderingKey(json.RawMessage(`{"amount":100}`))
	require.ErrorContains(t, err, `ordering key: args have no field "account"`)

	require.Equal(t, time.Second, c.Backoff(1))
	require.Equal(t, 4*time.Second, c.Backoff(3))
	require.Equal(t, 5*time.Minute, c.Backoff(40))
}
