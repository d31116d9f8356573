package httpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"

	"github.com/reckonhq/reckon/effects"
)

// Header names of the wire protocol.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderEffectID       = "Reckon-Effect-Id"
	HeaderAttempt        = "Reckon-Attempt"
	// HeaderCorrelationID carries the effect's self-routing correlation id ({run}:{effect id}),
	// the id an asynchronous endpoint names when it calls POST /v1/callbacks/{correlation_id}.
	HeaderCorrelationID = "Reckon-Correlation-Id"
	// HeaderCallbackSecret carries the effect's callback secret on dispatch, compensate and cancel
	// calls: an endpoint that answers 202 Accepted signs its callback with it (docs/async.md).
	HeaderCallbackSecret = "Reckon-Callback-Secret"
	// HeaderSignature signs a callback with that secret: "t=<unix seconds>,v1=<hex
	// HMAC-SHA256(secret, "<t>.<raw body>")>", sent with HeaderEffectID (docs/async.md).
	HeaderSignature = "Reckon-Signature"
)

// maxResponse bounds the response bodies read; a longer one counts as invalid (UNKNOWN).
const maxResponse = 1 << 20

// maxRetryAfter caps a Retry-After header.
const maxRetryAfter = time.Hour

// traceContext writes the traceparent (and tracestate) headers of every call.
var traceContext = propagation.TraceContext{}

// defaultClient is the client of connectors made without one.
var defaultClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// Request is the JSON body of every call of the wire protocol.
type Request struct {
	EffectID       uuid.UUID       `json:"effect_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	BusinessKey    *string         `json:"business_key"` // null when the effect has none
	Args           json.RawMessage `json:"args"`
	Attempt        int             `json:"attempt"`
	// CorrelationID is the id under which an endpoint that answers 202 Accepted reports the
	// outcome later: POST /v1/callbacks/{correlation_id}.
	CorrelationID string `json:"correlation_id"`
	// Original is set on compensate calls: the effect being undone.
	Original *RequestOriginal `json:"original,omitempty"`
}

// RequestOriginal describes, in a compensate call, the confirmed effect being undone.
type RequestOriginal struct {
	EffectID uuid.UUID       `json:"effect_id"`
	Result   json.RawMessage `json:"result"`
}

// StatusResponse is the JSON answer of a status check.
type StatusResponse struct {
	// Status is "present", "absent", "duplicate" or "inconclusive".
	Status string `json:"status"`
	// Result is the effect's result (present, duplicate).
	Result json.RawMessage `json:"result,omitempty"`
	// Count is how many times the effect happened (duplicate).
	Count int `json:"count,omitempty"`
}

// Connector returns the effects.Connector that calls d's URLs over client with the wire
// protocol (see the package documentation). A nil client uses a shared default one. The client
// is used without its redirect policy: redirects are never followed, a 3xx is UNKNOWN. d's unset
// settings take their defaults. The connector has a StatusCheck only if d has a StatusURL, a
// Compensate only if it has a CompensateURL, a Cancel only if it has a CancelURL and a
// BusinessKey only if it has BusinessKeyFields.
func (d Definition) Connector(client *http.Client) effects.Connector {
	d = d.WithDefaults()
	if client == nil {
		client = defaultClient
	}
	noRedirects := *client
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	caller := &caller{client: &noRedirects, name: d.Name}

	c := effects.Connector{
		Name: d.Name, Tags: d.Tags, Timeout: d.Timeout, MaxAttempts: d.MaxAttempts,
		StatusCheckLimit: d.StatusCheckLimit, Backoff: d.backoff, Unsafe: d.Unsafe,
		AsyncTimeout: d.AsyncTimeout, HardTimeout: d.HardTimeout,
		RequiresConfirmation: d.RequiresConfirmation, ConfirmationPrompt: d.ConfirmationPrompt, Limit: d.Limit,
		Description: d.Description, ArgsSchema: d.ArgsSchema, Tenants: d.Tenants,
	}
	dispatchURL := d.DispatchURL
	c.Dispatch = func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
		return caller.perform(ctx, "dispatch", dispatchURL, requestOf(call, nil), call)
	}
	if statusURL := d.StatusURL; statusURL != "" {
		c.StatusCheck = func(ctx context.Context, call effects.Call) (effects.Status, error) {
			return caller.status(ctx, statusURL, call)
		}
	}
	if compensateURL := d.CompensateURL; compensateURL != "" {
		c.Compensate = func(ctx context.Context, call effects.Call, original effects.Original) (json.RawMessage, error) {
			return caller.perform(ctx, "compensate", compensateURL, requestOf(call, &original), call)
		}
	}
	if cancelURL := d.CancelURL; cancelURL != "" {
		c.Cancel = func(ctx context.Context, call effects.Call) error {
			return caller.cancel(ctx, cancelURL, call)
		}
	}
	if len(d.BusinessKeyFields) > 0 {
		c.BusinessKey = d.businessKey
	}
	c.DedupByBusinessKey = d.DedupByBusinessKey
	if len(d.OrderingKeyFields) > 0 {
		c.OrderingKey = d.orderingKey
	}
	return c
}

func requestOf(call effects.Call, original *effects.Original) Request {
	req := Request{EffectID: call.EffectID, IdempotencyKey: call.IdempotencyKey, Args: call.Args, Attempt: call.Attempt,
		CorrelationID: call.CorrelationID}
	if call.BusinessKey != "" {
		req.BusinessKey = &call.BusinessKey
	}
	if len(req.Args) == 0 {
		req.Args = json.RawMessage(`{}`)
	}
	if original != nil {
		result := original.Result
		if len(result) == 0 {
			result = json.RawMessage(`null`)
		}
		req.Original = &RequestOriginal{EffectID: original.EffectID, Result: result}
	}
	return req
}

type caller struct {
	client *http.Client
	name   string
}

// response is what came back from one call: the status and the body, or the error that ended
// the exchange.
type response struct {
	status     int
	statusText string
	header     http.Header
	body       []byte
	readErr    error
}

// post sends body to url. A transport error is returned as is; an error while reading the body is
// in response.readErr.
func (c *caller) post(ctx context.Context, url string, body Request, call effects.Call) (*response, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, effects.Permanent(fmt.Errorf("encode request: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, effects.Permanent(fmt.Errorf("build request: %w", err))
	}
	// Without GetBody net/http never sends the request again on its own (it would for a request
	// with an Idempotency-Key on a broken keep-alive connection): one attempt is one request.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "reckon-reactor")
	req.Header.Set(HeaderIdempotencyKey, body.IdempotencyKey)
	req.Header.Set(HeaderEffectID, call.EffectID.String())
	req.Header.Set(HeaderAttempt, strconv.Itoa(call.Attempt))
	if call.CorrelationID != "" {
		req.Header.Set(HeaderCorrelationID, call.CorrelationID)
	}
	if call.CallbackSecret != "" {
		req.Header.Set(HeaderCallbackSecret, call.CallbackSecret)
	}
	// The call's span (reckon.connector.dispatch and the like) as W3C traceparent/tracestate, so
	// that the upstream's spans join the effect's trace; nothing without a valid span.
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := &response{status: resp.StatusCode, statusText: resp.Status, header: resp.Header}
	out.body, out.readErr = io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if out.readErr == nil && len(out.body) > maxResponse {
		out.readErr = fmt.Errorf("response longer than %d bytes", maxResponse)
	}
	return out, nil
}

// perform makes a dispatch or compensate call and classifies its answer (package documentation).
func (c *caller) perform(ctx context.Context, what, url string, body Request, call effects.Call) (json.RawMessage, error) {
	resp, err := c.post(ctx, url, body, call)
	if err != nil {
		if notSent(err) {
			return nil, effects.Retryable(fmt.Errorf("%s %s: nothing sent: %w", what, c.name, err))
		}
		if effects.IsPermanent(err) {
			return nil, err
		}
		return nil, fmt.Errorf("%s %s: outcome unknown: %w", what, c.name, err)
	}
	return classify(what, c.name, resp, call)
}

func classify(what, name string, resp *response, call effects.Call) (json.RawMessage, error) {
	prefix := fmt.Sprintf("%s %s: %s", what, name, resp.statusText)
	switch code := resp.status; {
	case code == http.StatusOK || code == http.StatusCreated:
		if resp.readErr != nil {
			return nil, fmt.Errorf("%s but the body was cut: %v", prefix, resp.readErr)
		}
		if len(bytes.TrimSpace(resp.body)) == 0 || !json.Valid(resp.body) {
			return nil, fmt.Errorf("%s with a truncated or invalid JSON body (%d bytes)", prefix, len(resp.body))
		}
		return json.RawMessage(bytes.TrimSpace(resp.body)), nil
	case code == http.StatusAccepted:
		return nil, acceptedOutcome(prefix, resp, call)
	case code == http.StatusTooManyRequests || code == http.StatusTooEarly:
		err := fmt.Errorf("%s: not applied: %s", prefix, snippet(resp.body))
		if after, ok := retryAfter(resp.header); ok {
			return nil, effects.RetryAfter(err, after)
		}
		return nil, effects.Retryable(err)
	case code == http.StatusServiceUnavailable:
		if after, ok := retryAfter(resp.header); ok {
			return nil, effects.RetryAfter(fmt.Errorf("%s with Retry-After: not applied: %s", prefix, snippet(resp.body)), after)
		}
		return nil, fmt.Errorf("%s without Retry-After: outcome unknown: %s", prefix, snippet(resp.body))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout:
		return nil, effects.Permanent(fmt.Errorf("%s: %s", prefix, snippet(resp.body)))
	default:
		return nil, fmt.Errorf("%s: outcome unknown: %s", prefix, snippet(resp.body))
	}
}

// acceptedOutcome is the outcome of a 202 Accepted answer: the upstream took the call and will
// report its outcome with a callback. The body may name the correlation id the callback will use
// ({"correlation_id":…}); an empty body, or one without it, means the id Reckon sent
// (Reckon-Correlation-Id). A body that was cut or is not JSON leaves the outcome unknown: the
// upstream accepted something, but we cannot tell under which id.
func acceptedOutcome(prefix string, resp *response, call effects.Call) error {
	if resp.readErr != nil {
		return fmt.Errorf("%s but the body was cut: %v", prefix, resp.readErr)
	}
	id := call.CorrelationID
	if body := bytes.TrimSpace(resp.body); len(body) > 0 {
		var answer struct {
			CorrelationID string `json:"correlation_id"`
		}
		if err := json.Unmarshal(body, &answer); err != nil {
			return fmt.Errorf("%s with an invalid JSON body: outcome unknown: %v", prefix, err)
		}
		if answer.CorrelationID != "" {
			id = answer.CorrelationID
		}
	}
	if id == "" {
		return fmt.Errorf("%s without a correlation id: outcome unknown", prefix)
	}
	return effects.Accepted(id)
}

// status makes a status check call. Every answer that is not 200 with a known status is
// inconclusive.
func (c *caller) status(ctx context.Context, url string, call effects.Call) (effects.Status, error) {
	resp, err := c.post(ctx, url, requestOf(call, nil), call)
	if err != nil {
		return effects.Inconclusive(fmt.Sprintf("status check %s: %v", c.name, err)), nil
	}
	if resp.status != http.StatusOK || resp.readErr != nil {
		return effects.Inconclusive(fmt.Sprintf("status check %s: %s: %s", c.name, resp.statusText, snippet(resp.body))), nil
	}
	var answer StatusResponse
	if err := json.Unmarshal(resp.body, &answer); err != nil {
		return effects.Inconclusive(fmt.Sprintf("status check %s: invalid JSON: %v", c.name, err)), nil
	}
	switch answer.Status {
	case "present":
		return effects.Present(answer.Result), nil
	case "absent":
		return effects.Absent(), nil
	case "duplicate":
		return effects.Duplicate(answer.Count, answer.Result), nil
	case "inconclusive":
		return effects.Inconclusive(fmt.Sprintf("status check %s: upstream says inconclusive", c.name)), nil
	default:
		return effects.Inconclusive(fmt.Sprintf("status check %s: unknown status %q", c.name, answer.Status)), nil
	}
}

// cancel asks the upstream to abandon the accepted operation of call. Only 200, 201 or 204 says it
// did (the body is ignored): the effect becomes FAILED. Every other answer — 202 (will try), a
// 4xx (too late, say), a 5xx, a timeout, a dropped connection — is an error, and the outcome
// stays unknown.
func (c *caller) cancel(ctx context.Context, url string, call effects.Call) error {
	resp, err := c.post(ctx, url, requestOf(call, nil), call)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", c.name, err)
	}
	switch resp.status {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent:
		return nil
	default:
		return fmt.Errorf("cancel %s: %s: not cancelled: %s", c.name, resp.statusText, snippet(resp.body))
	}
}

// notSent reports whether err proves the request never reached the endpoint: the connection
// could not be opened (refused, no route, unknown host, dial timeout).
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date, capped at an hour.
func retryAfter(header http.Header) (time.Duration, bool) {
	value := header.Get("Retry-After")
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.Atoi(value); err == nil && seconds >= 0 {
		return min(time.Duration(seconds)*time.Second, maxRetryAfter), true
	}
	if at, err := http.ParseTime(value); err == nil {
		return min(max(time.Until(at), 0), maxRetryAfter), true
	}
	return 0, false
}

// snippet is the start of a response body for an error message.
func snippet(body []byte) string {
	const limit = 300
	body = bytes.TrimSpace(body)
	if len(body) > limit {
		return string(body[:limit]) + "…"
	}
	if len(body) == 0 {
		return "(empty body)"
	}
	return string(body)
}
