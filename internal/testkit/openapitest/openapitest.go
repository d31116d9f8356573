// Package openapitest holds HTTP traffic to an OpenAPI 3.1 document (package docs/openapi) in
// tests, with github.com/getkin/kin-openapi: Load loads and validates a document, Server wraps a
// server the document's paths describe and Webhooks a fake receiver of the requests its webhooks
// describe, so that every request and answer of a test is checked against the document. What
// does not match is reported, every violation listed, when the test ends.
package openapitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// maxCaptured bounds the bytes of a request or response body kept for validation; a longer body
// is reported as too long to check.
const maxCaptured = 4 << 20

// loaded holds the documents Load loaded and validated, by their text.
var loaded sync.Map

// Load parses the OpenAPI document data and validates it (the document's own rules, and every
// schema's), failing t if it does not load or validate. A document is loaded once per test binary
// and shared (validating against it changes nothing in it): do not change it.
func Load(t testing.TB, data string) *openapi3.T {
	t.Helper()
	if doc, ok := loaded.Load(data); ok {
		return doc.(*openapi3.T)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(data))
	if err != nil {
		t.Fatalf("openapitest: load the document: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableMultiError()); err != nil {
		t.Fatalf("openapitest: the document is invalid: %v", err)
	}
	actual, _ := loaded.LoadOrStore(data, doc)
	return actual.(*openapi3.T)
}

// Server wraps h, a server whose routes doc's paths describe (any host: doc's servers are
// ignored). Every answer h gives is checked: its status must be one the operation lists (there is
// no "default"), its headers and body must match the response's. A request is checked too — its
// parameters, security and body — when its answer is 2xx: a request the server refused may be
// malformed on purpose (a test of bad input), and the answer to it is what the document must
// describe. A request for a path or method the document does not have must get an answer whose
// body is components/schemas/Error. A text/event-stream answer is checked up to its headers.
func Server(t testing.TB, doc *openapi3.T, h http.Handler) http.Handler {
	t.Helper()
	routed := *doc
	routed.Servers = nil // match any host: test servers listen on random ports
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		t.Fatalf("openapitest: router: %v", err)
	}
	errorSchema := doc.Components.Schemas["Error"]
	if errorSchema == nil {
		t.Fatalf("openapitest: the document has no components/schemas/Error")
	}
	v := newViolations(t)
	check := func(ex *exchange) {
		ctx := context.Background()
		route, pathParams, err := router.FindRoute(ex.requestForValidation())
		if err != nil {
			// Not a route of the document: the server's JSON 404 or 405.
			if err := checkJSON(doc, errorSchema, ex.response.body()); err != nil {
				v.add(ex, "an answer for no route of the document is not an Error: %v", err)
			}
			return
		}
		input := &openapi3filter.RequestValidationInput{
			Request: ex.requestForValidation(), PathParams: pathParams, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: authenticate, MultiError: true},
		}
		if status := ex.response.status; status >= 200 && status <= 299 {
			if err := openapi3filter.ValidateRequest(ctx, input); err != nil {
				v.add(ex, "request: %v", err)
			}
		}
		if err := validateResponse(ctx, input, ex, false); err != nil {
			v.add(ex, "response: %v", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.begin()
		ex := capture(w, r)
		h.ServeHTTP(ex.response, ex.request)
		ex.response.finish()
		if ex.response.hijacked {
			v.end() // no answer
			return
		}
		v.check(func() { check(ex) })
	})
}

// Webhooks wraps h, a fake receiver of the requests that doc's webhooks describe, such as an
// upstream of Reckon's connector wire protocol. route names the webhook a request is for ("" when
// it is none of them, itself a violation). Every request must match its webhook; every answer h
// gives must be one the webhook lists, with its headers and body, unless the handler calls
// OffProtocol for it (an answer outside the protocol on purpose), hijacks the connection (no
// answer) or answers after the request's context ended (nobody reads it). An answer's body is
// read as the webhook's media type whatever its Content-Type (Reckon does not check it), and an
// empty body is not checked against a schema.
func Webhooks(t testing.TB, doc *openapi3.T, route func(*http.Request) string, h http.Handler) http.Handler {
	t.Helper()
	v := newViolations(t)
	check := func(ex *exchange, name string, answered bool) {
		item := doc.Webhooks[name]
		if item == nil {
			v.add(ex, "no webhook %q in the document", name)
			return
		}
		operation := item.GetOperation(ex.request.Method)
		if operation == nil {
			v.add(ex, "webhook %q has no %s operation", name, ex.request.Method)
			return
		}
		ctx := context.Background()
		input := &openapi3filter.RequestValidationInput{
			Request: ex.requestForValidation(),
			Route:   &routers.Route{Spec: doc, Path: name, PathItem: item, Method: ex.request.Method, Operation: operation},
			Options: &openapi3filter.Options{AuthenticationFunc: authenticate, MultiError: true},
		}
		if err := openapi3filter.ValidateRequest(ctx, input); err != nil {
			v.add(ex, "request of webhook %s: %v", name, err)
		}
		if !answered {
			return
		}
		if err := validateResponse(ctx, input, ex, true); err != nil {
			v.add(ex, "answer to webhook %s: %v", name, err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.begin()
		off := new(bool)
		ex := capture(w, r.WithContext(context.WithValue(r.Context(), offProtocolKey{}, off)))
		h.ServeHTTP(ex.response, ex.request)
		ex.response.finish()
		name, answered := route(r), !*off && !ex.response.hijacked && r.Context().Err() == nil
		v.check(func() { check(ex, name, answered) })
	})
}

type offProtocolKey struct{}

// OffProtocol marks the answer to r, a request a Webhooks handler received, as outside the
// document on purpose (invalid JSON, an unknown status): it is not checked.
func OffProtocol(r *http.Request) {
	if off, ok := r.Context().Value(offProtocolKey{}).(*bool); ok {
		*off = true
	}
}

// RequireSchema checks that value, encoded as JSON, matches the schema doc's components name,
// failing t if it does not: for what no exchange of the tests carries, such as the Go types of a
// body another package sends.
func RequireSchema(t testing.TB, doc *openapi3.T, name string, value any) {
	t.Helper()
	schema := doc.Components.Schemas[name]
	if schema == nil {
		t.Fatalf("openapitest: the document has no components/schemas/%s", name)
	}
	encoded, err := json.Marshal(value)
	if err != nil {
		t.Fatalf("openapitest: encode %T: %v", value, err)
	}
	if err := checkJSON(doc, schema, encoded); err != nil {
		t.Errorf("openapitest: %T does not match components/schemas/%s: %v\n%s", value, name, err, encoded)
	}
}

// validateResponse checks ex's answer against input's operation. anyContentType reads a body as
// the response's first media type whatever its Content-Type says.
func validateResponse(ctx context.Context, input *openapi3filter.RequestValidationInput, ex *exchange, anyContentType bool) error {
	resp := ex.response
	header := resp.header.Clone()
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	switch {
	case resp.buf.tooLong:
		return fmt.Errorf("body longer than %d bytes: not checked", maxCaptured)
	case len(resp.body()) == 0 && anyContentType:
		opts.ExcludeResponseBody = true
	case mediaType == "text/event-stream":
		opts.ExcludeResponseBody = true // a stream: its body never ends
	case anyContentType:
		if ref := input.Route.Operation.Responses.Status(resp.status); ref != nil && ref.Value != nil {
			for mt := range ref.Value.Content {
				header.Set("Content-Type", mt)
				break
			}
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: resp.status, Header: header, Options: opts,
	}
	out.SetBodyBytes(resp.body())
	return openapi3filter.ValidateResponse(ctx, out)
}

// checkJSON validates body, JSON, against schema.
func checkJSON(doc *openapi3.T, schema *openapi3.SchemaRef, body []byte) error {
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return err
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.VisitAsResponse()}
	if doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return schema.Value.VisitJSON(value, opts...)
}

// authenticate checks that a request carries the credential a security scheme names: a bearer
// token, or an API key header. Whether the credential is good is the server's to say.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme := in.SecurityScheme
	header := in.RequestValidationInput.Request.Header
	switch {
	case scheme.Type == "http" && strings.EqualFold(scheme.Scheme, "bearer"):
		if prefix, _, ok := strings.Cut(header.Get("Authorization"), " "); ok && strings.EqualFold(prefix, "Bearer") {
			return nil
		}
		return errors.New("no Authorization: Bearer header")
	case scheme.Type == "apiKey" && scheme.In == "header":
		if header.Get(scheme.Name) != "" {
			return nil
		}
		return fmt.Errorf("no %s header", scheme.Name)
	}
	return fmt.Errorf("security scheme %q of type %q: not checked by openapitest", in.SecuritySchemeName, scheme.Type)
}

// violations checks exchanges and collects what did not match, and fails the test with all of it
// when it ends: after the cleanups registered later, such as the test server's Close, have run,
// and every exchange has been answered and checked (a hijacked one may outlive Close).
type violations struct {
	mu      sync.Mutex
	pending int // exchanges being answered or checked
	list    []string
}

// maxCheckWait bounds the wait for the exchanges under way when a test ends.
const maxCheckWait = 30 * time.Second

func newViolations(t testing.TB) *violations {
	v := &violations{}
	t.Cleanup(func() {
		for deadline := time.Now().Add(maxCheckWait); ; time.Sleep(5 * time.Millisecond) {
			v.mu.Lock()
			if v.pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("openapitest: %d exchanges still under way %v after the test ended: not checked", v.pending, maxCheckWait)
				break
			}
			v.mu.Unlock()
		}
		defer v.mu.Unlock()
		if len(v.list) > 0 {
			t.Errorf("openapitest: %d exchanges do not match the OpenAPI document:\n%s", len(v.list), strings.Join(v.list, "\n"))
		}
	})
	return v
}

// begin counts an exchange under way, from the start of its request.
func (v *violations) begin() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pending++
}

// end counts an exchange done.
func (v *violations) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pending--
}

// check runs fn, the check of an exchange whose handler has returned, in the background, then ends
// the exchange: the answer reaches the client (net/http sends a buffered answer when the handler
// returns) without waiting for the check, which would slow the tests that time their upstreams.
func (v *violations) check(fn func()) {
	go func() {
		defer v.end()
		fn()
	}()
}

func (v *violations) add(ex *exchange, format string, args ...any) {
	msg := fmt.Sprintf("- %s %s → %d: %s", ex.request.Method, ex.request.URL.RequestURI(), ex.response.status, fmt.Sprintf(format, args...))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, msg)
}

// exchange is one request and its answer, as the handler read and wrote them.
type exchange struct {
	request  *http.Request
	body     *capped // the request body, as far as the handler read it
	response *recorder
}

// capture returns r with its body recorded as it is read, and w recording the answer.
func capture(w http.ResponseWriter, r *http.Request) *exchange {
	ex := &exchange{body: &capped{}, response: &recorder{ResponseWriter: w}}
	req := r.Clone(r.Context())
	if r.Body != nil && r.Body != http.NoBody {
		req.Body = &teeBody{ReadCloser: r.Body, copy: ex.body}
	}
	ex.request = req
	return ex
}

// requestForValidation is the request with its recorded body. A body without a Content-Type is
// read as JSON, as Reckon's server and receivers read it.
func (ex *exchange) requestForValidation() *http.Request {
	req := ex.request.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(ex.body.buf.Bytes()))
	req.ContentLength = int64(ex.body.buf.Len())
	if req.ContentLength > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// capped is a buffer that keeps at most maxCaptured bytes.
type capped struct {
	buf     bytes.Buffer
	tooLong bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := maxCaptured - c.buf.Len(); len(p) > room {
		c.tooLong = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return len(p), nil
}

type teeBody struct {
	io.ReadCloser
	copy *capped
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	_, _ = b.copy.Write(p[:n])
	return n, err
}

// recorder passes an answer through and records it: status, headers as they were when it was
// sent, and body. It flushes, hijacks and unwraps (http.ResponseController) as w does.
type recorder struct {
	http.ResponseWriter
	status   int
	header   http.Header
	buf      capped
	hijacked bool
}

// finish records what net/http sends for a handler that wrote nothing: 200 and its headers.
func (r *recorder) finish() {
	if r.status == 0 {
		r.status = http.StatusOK
		r.header = r.ResponseWriter.Header().Clone()
	}
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
		r.header = r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	_, _ = r.buf.Write(p)
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.hijacked = true
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) body() []byte { return r.buf.buf.Bytes() }
