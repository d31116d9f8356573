package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/semaphore"

	"github.com/reckonhq/reckon/cmd/server/internal/httpobs"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
	"github.com/reckonhq/reckon/turns"
)

// DefaultMaxBodyBytes is the default limit on a request body.
const DefaultMaxBodyBytes = 1 << 20

// DefaultIdempotencyTTL is how long a response stored for an Idempotency-Key is replayed by default.
const DefaultIdempotencyTTL = 24 * time.Hour

// maxIdempotencyKeyLen bounds the Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// Config configures a Server. Pool and Effects are required.
type Config struct {
	// Pool is the database. Required.
	Pool *pgxpool.Pool
	// Effects enqueues and inspects effects; its registry must hold the connectors that callers
	// name. Required. The server does not start it.
	Effects *effects.Client
	// RefreshConnectors is called when a request names a connector the registry does not hold
	// (another server may have just added it), before the request is refused, and after this
	// server changed the HTTP connectors; never while the request holds a transaction. Default: a
	// Sync of Pool into the Effects client's registry by an httpconn.Syncer of the server's own (a
	// process that syncs that registry itself passes a Sync by its own Syncer here).
	RefreshConnectors func(ctx context.Context) error
	// Sagas starts and inspects sagas (POST/GET /v1/sagas). Its effects client must be Effects.
	// Optional: without it the saga endpoints answer 501.
	Sagas *saga.Client
	// RefreshSagas is called when a request names a saga definition the Sagas client does not
	// have, before the request is refused, and after this server stored a definition; never while
	// the request holds a transaction. Default: a Sync of Pool into Sagas by a sagadef.Syncer of
	// the server's own (a process that syncs Sagas itself passes a Sync by its own Syncer here).
	RefreshSagas func(ctx context.Context) error
	// Turns submits inbound messages (POST /v1/sessions/{key}/messages) and lists a session's turns;
	// its effects client must be Effects. It needs no started River client: the reactors run the
	// turns. Optional: without it the session endpoints answer 501.
	Turns *turns.Client
	// Ops is the operators' reads and actions the API shares with the console and the CLI
	// (connector limits). Default: ops.New of Pool, Effects, Sagas and Turns.
	Ops *ops.Ops
	// Logger receives request errors. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes limits a request body; a larger one is refused with 413. Default
	// DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// MaxConcurrentRequests bounds the API requests answered at once; more wait their turn (until
	// the client gives up). Handlers hold at most one of Pool's connections at a time, but the bound
	// keeps the pool from being exhausted by requests alone: health checks and the background
	// reloads still get a connection. Default: half of Pool's MaxConns, at least 1.
	MaxConcurrentRequests int
	// MaxBodyBytesInFlight bounds the request bytes held at once, from the read of each body to the
	// end of its request: a request waits for its share (its Content-Length, or MaxBodyBytes when
	// it sends none), so that many large bodies at once cannot take the server's memory. Default 4
	// × MaxBodyBytes; at least MaxBodyBytes.
	MaxBodyBytesInFlight int64
	// IdempotencyTTL is how long a response stored for an Idempotency-Key is replayed: past it the
	// key is free again, whether or not retention has deleted its row yet. Default
	// DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
	// Events is the event log GET /v1/events streams. Default: events.New of Pool, woken by the
	// Effects client's notifications (its one LISTEN connection).
	Events *events.Log
	// EventsKeepAlive is how long an event stream may be idle before a comment line is sent, so
	// that proxies and clients do not take it for dead. Default DefaultEventsKeepAlive (15s).
	EventsKeepAlive time.Duration
	// Stopping, when closed, ends every event stream (GET /v1/events) and refuses new ones with
	// 503, so that streams, which never end by themselves, do not hold up a graceful shutdown:
	// close it when the HTTP server starts to stop. Default nil: a stream ends only when its
	// client goes away or its request's context ends.
	Stopping <-chan struct{}
}

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("api: Config.Pool is required")
	case c.Effects == nil:
		return errors.New("api: Config.Effects is required")
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("api: Config.MaxBodyBytes must not be negative, got %d", c.MaxBodyBytes)
	case c.MaxBodyBytesInFlight < 0 || (c.MaxBodyBytesInFlight > 0 && c.MaxBodyBytesInFlight < cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)):
		return fmt.Errorf("api: Config.MaxBodyBytesInFlight must be at least MaxBodyBytes, got %d", c.MaxBodyBytesInFlight)
	case c.MaxConcurrentRequests < 0:
		return fmt.Errorf("api: Config.MaxConcurrentRequests must not be negative, got %d", c.MaxConcurrentRequests)
	case c.IdempotencyTTL < 0:
		return fmt.Errorf("api: Config.IdempotencyTTL must not be negative, got %v", c.IdempotencyTTL)
	case c.EventsKeepAlive < 0:
		return fmt.Errorf("api: Config.EventsKeepAlive must not be negative, got %v", c.EventsKeepAlive)
	}
	return nil
}

// Server is the API: a set of routes on an http.ServeMux. It is safe for concurrent use.
type Server struct {
	config  Config
	pool    *pgxpool.Pool
	effects *effects.Client
	// ops is the operators' reads and actions (connector limits) over Config's clients.
	ops    *ops.Ops
	logger *slog.Logger
	mux    *routeMux
	// slots bounds the requests answered at once (Config.MaxConcurrentRequests).
	slots chan struct{}
	// bodies holds Config.MaxBodyBytesInFlight.
	bodies *semaphore.Weighted
}

// New returns a Server with the effects routes registered.
func New(config *Config) (*Server, error) {
	cfg := *config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBodyBytesInFlight == 0 {
		cfg.MaxBodyBytesInFlight = 4 * cfg.MaxBodyBytes
	}
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if cfg.Events == nil {
		cfg.Events = events.New(cfg.Pool, cfg.Effects)
	}
	if cfg.Ops == nil {
		cfg.Ops = ops.New(cfg.Pool, cfg.Effects, cfg.Sagas, cfg.Turns)
	}
	if cfg.EventsKeepAlive == 0 {
		cfg.EventsKeepAlive = DefaultEventsKeepAlive
	}
	if cfg.MaxConcurrentRequests == 0 {
		cfg.MaxConcurrentRequests = max(1, int(cfg.Pool.Config().MaxConns)/2)
	}
	if cfg.RefreshSagas == nil && cfg.Sagas != nil {
		pool, sagas := cfg.Pool, cfg.Sagas
		syncer := new(sagadef.Syncer)
		cfg.RefreshSagas = func(ctx context.Context) error {
			_, err := syncer.Sync(ctx, pool, sagas)
			return err
		}
	}
	if cfg.RefreshConnectors == nil {
		cfg.RefreshConnectors = httpconn.Refresher(cfg.Pool, cfg.Effects.Registry())
	}
	s := &Server{
		config: cfg, pool: cfg.Pool, effects: cfg.Effects, logger: cfg.Logger, mux: &routeMux{ServeMux: http.NewServeMux()},
		ops:    cfg.Ops,
		slots:  make(chan struct{}, cfg.MaxConcurrentRequests),
		bodies: semaphore.NewWeighted(cfg.MaxBodyBytesInFlight),
	}
	s.routes()
	return s, nil
}

// Register mounts the API's /v1/ routes on mux, next to the process's own (health, metrics), and
// the OpenAPI documents (documents), which need no token.
func (s *Server) Register(mux *http.ServeMux) {
	mux.Handle("/v1/", s)
	for _, d := range documents {
		mux.HandleFunc(d.pattern, serveDocument(d.body))
	}
}

// ServeHTTP answers one API request. Unknown paths and methods get JSON 404 and 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	httpobs.SetRoute(r.Context(), pattern)
	if pattern == "" {
		// The mux answers 404 or 405 in plain text; answer the same status in JSON.
		probe := &statusProbe{header: http.Header{}}
		s.mux.ServeHTTP(probe, r)
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if probe.status == http.StatusMethodNotAllowed {
			s.writeError(w, r, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
		s.writeError(w, r, errorf(http.StatusNotFound, codeNotFound, "no route %s %s", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusProbe records what the mux would answer to an unroutable request.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// Call is one authenticated API request.
type Call struct {
	// Request is the HTTP request; its body has been read into Body.
	Request *http.Request
	// Token is the caller's token; Token.TenantID scopes everything the call may see or change. A
	// system token (no tenant) reaches only the routes registered with admitSystem.
	Token *tenants.Token
	// Body is the request body (at most Config.MaxBodyBytes).
	Body []byte

	onCommit []func(ctx context.Context)
	// refreshed lists the reloads (refreshFirst) done for this call.
	refreshed map[string]bool
	// leave gives the call's request slot (Config.MaxConcurrentRequests) back; later calls do
	// nothing. An event stream leaves once it has started.
	leave func()
}

// OnCommit runs fn after the mutation's transaction has committed (never if it rolls back), before
// the response is written. For effects outside the database, such as refreshing a registry.
func (c *Call) OnCommit(fn func(ctx context.Context)) { c.onCommit = append(c.onCommit, fn) }

// Tenant is the caller's tenant. It is empty only for a system token, which reaches the routes
// registered with admitSystem alone: there it is the one scope of the system tokens'
// Idempotency-Keys (a tenant id is never empty), and such a route never passes it on as a tenant.
func (c *Call) Tenant() string { return c.Token.TenantID }

// Actor names the caller in the audit trail: "api:{token name or prefix}", plus "/{who}" when
// the request names a person.
func (c *Call) Actor(who string) string {
	label := c.Token.Name
	if label == "" {
		label = c.Token.Prefix
	}
	actor := "api:" + label
	if who != "" {
		actor += "/" + who
	}
	return actor
}

// Decode parses Body, a JSON object, into v strictly: unknown fields (field names match exactly,
// case included), trailing data, an empty body and type mismatches are a 400 error. The body's
// text and JSON were checked when the request came in (checkRequest).
func (c *Call) Decode(v any) error {
	if len(bytes.TrimSpace(c.Body)) == 0 {
		return badRequest(codeInvalidJSON, "request body is empty: want a JSON object")
	}
	var unknown *jsonx.Error
	if err := jsonx.CheckFields(c.Body, v); errors.As(err, &unknown) {
		if rest, ok := strings.CutPrefix(unknown.Problem, "unknown field"); ok {
			return badRequest(codeInvalidRequest, "unknown field %q%s", unknown.Path, rest)
		}
		return badRequest(codeInvalidRequest, "field %q: %s", unknown.Path, unknown.Problem)
	}
	dec := json.NewDecoder(bytes.NewReader(c.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syntaxErr *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest(codeInvalidJSON, "malformed JSON: %v", err)
		case errors.As(err, &typeErr):
			return badRequest(codeInvalidRequest, "field %q: want %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badRequest(codeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), "json: "))
		default:
			return badRequest(codeInvalidRequest, "%v", err)
		}
	}
	if dec.More() {
		return badRequest(codeInvalidJSON, "trailing data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(codeInvalidJSON, "trailing data after the JSON object")
	}
	return nil
}

// decodeOptional is Decode for a body that may be left out: an empty body, or only white space,
// leaves v as it is.
func (c *Call) decodeOptional(v any) error {
	if len(bytes.TrimSpace(c.Body)) == 0 {
		return nil
	}
	return c.Decode(v)
}

// queryFunc answers a request that changes nothing (GET): a status and a body to encode as JSON,
// or an error.
type queryFunc func(ctx context.Context, call *Call) (int, any, error)

// mutationFunc answers a request that changes something (POST, DELETE) in tx, the request's
// transaction: committed, together with the stored Idempotency-Key response, when it returns a
// 2xx status and no error; rolled back otherwise.
type mutationFunc func(ctx context.Context, tx pgx.Tx, call *Call) (int, any, error)

// routeOption adjusts a route added by handleQuery, handleMutation or handleAction.
type routeOption int

const (
	// admitSystem admits system tokens to the route as well as tenant tokens: for the routes of
	// what every tenant shares (HTTP connectors, saga definitions) and of turn handlers, whose
	// handlers decide what each kind of token may do. Without it the route is tenant-scoped and a
	// system token is refused with 403 forbidden before the handler runs, so that no handler ever
	// sees a call without a tenant.
	admitSystem routeOption = iota + 1
)

// handleQuery adds an authenticated read-only endpoint, e.g. "GET /v1/sagas/{id}".
func (s *Server) handleQuery(pattern string, fn queryFunc, opts ...routeOption) {
	s.handle(pattern, opts, func(w http.ResponseWriter, r *http.Request, call *Call) {
		status, body, err := fn(r.Context(), call)
		if err != nil {
			s.writeError(w, r, err)
		} else {
			s.writeJSON(w, r, status, body)
		}
	})
}

// handleMutation adds an authenticated endpoint that changes something, e.g. "POST /v1/sagas",
// with Idempotency-Key support (see the package documentation).
func (s *Server) handleMutation(pattern string, fn mutationFunc, opts ...routeOption) {
	s.handle(pattern, opts, func(w http.ResponseWriter, r *http.Request, call *Call) { s.mutate(w, r, call, fn) })
}

// actionFunc answers a request that changes something (POST) in transactions of its own, for an
// operation that must not run in the request's transaction (it commits even when it refuses, or
// locks what it changes in a transaction of its own) and that is idempotent by itself. No
// database connection is held while it runs.
type actionFunc func(ctx context.Context, call *Call) (int, any, error)

// handleAction adds an authenticated endpoint that changes something in transactions of its own,
// e.g. "POST /v1/callbacks/{correlation_id}". An Idempotency-Key is honoured as for handleMutation
// with one difference: the response is stored after fn has run, not claimed before, so two
// concurrent first requests with one key may both run fn (which is why fn must be idempotent);
// the later one then answers with the stored response (or 422 when its request differs).
func (s *Server) handleAction(pattern string, fn actionFunc, opts ...routeOption) {
	s.handle(pattern, opts, func(w http.ResponseWriter, r *http.Request, call *Call) { s.act(w, r, call, fn) })
}

// handle adds an authenticated endpoint: every Handle… method goes through it. It authenticates
// the request and reads its body (begin), refuses a system token unless
// opts has admitSystem (the one place that keeps system tokens off the tenant-scoped routes),
// waits for a request slot (enter), then calls serve, which holds the slot until it returns or
// gives it back earlier (Call.leave: an event stream); a request refused on the way has already
// been answered.
func (s *Server) handle(pattern string, opts []routeOption, serve func(w http.ResponseWriter, r *http.Request, call *Call)) {
	systemAdmitted := slices.Contains(opts, admitSystem)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		call, ok := s.begin(w, r)
		if !ok {
			return
		}
		if call.Token.System && !systemAdmitted {
			s.writeError(w, r, errorf(http.StatusForbidden, codeForbidden,
				"a system token manages shared definitions (connectors, saga definitions, turn handlers); use a tenant token for %s", r.Pattern))
			return
		}
		release, ok := s.enter(w, r)
		if !ok {
			return
		}
		call.leave = sync.OnceFunc(release)
		defer call.leave()
		serve(w, r, call)
	})
}

// enter waits for one of the Config.MaxConcurrentRequests slots, once the request is authenticated
// and its body read (a slow client holds no slot). When the request ends first (the
// client went away or the server is stopping) it answers 503 and reports false.
func (s *Server) enter(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, true
	case <-r.Context().Done():
		s.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "the server is busy or stopping; retry later"))
		return nil, false
	}
}

// begin authenticates the request and reads its body within the limit. On failure it has answered.
func (s *Server) begin(w http.ResponseWriter, r *http.Request) (*Call, bool) {
	if signedCallback(r) {
		return s.beginSigned(w, r) // authenticated by its signature, not a token (signature.go)
	}
	token, err := s.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="reckon"`)
		s.writeError(w, r, err)
		return nil, false
	}
	call := &Call{Request: r, Token: token}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if call.Body, err = s.readBody(w, r); err != nil {
			s.writeError(w, r, err)
			return nil, false
		}
	}
	if err := checkRequest(r, call.Body); err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return call, true
}

// readBody reads the request's JSON body within Config.MaxBodyBytes, once it has a share of
// Config.MaxBodyBytesInFlight for the rest of the request. A DELETE takes none.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mediaType, _, err := mime.ParseMediaType(ct); err != nil || mediaType != "application/json" {
			return nil, errorf(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "Content-Type %q: want application/json", ct)
		}
	}
	limit := s.config.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "request body exceeds %d bytes", limit)
	}
	share := limit // a body of unknown length may take up to the limit
	if r.ContentLength >= 0 {
		share = max(r.ContentLength, 1)
	}
	if err := s.bodies.Acquire(r.Context(), share); err != nil {
		return nil, errorf(http.StatusServiceUnavailable, codeUnavailable, "the server is busy or stopping; retry later")
	}
	// Held until the request ends, with everything decoded from the body.
	context.AfterFunc(r.Context(), func() { s.bodies.Release(share) })
	buf := bytes.NewBuffer(make([]byte, 0, min(share, limit)+bytes.MinRead))
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errorf(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "request body exceeds %d bytes", tooLarge.Limit)
		}
		return nil, badRequest(codeInvalidJSON, "read request body: %v", err)
	}
	if r.Method == http.MethodDelete && buf.Len() > 0 {
		return nil, badRequest(codeInvalidRequest, "DELETE takes no request body")
	}
	return buf.Bytes(), nil
}

func (s *Server) authenticate(r *http.Request) (*tenants.Token, error) {
	token, err := tenants.AuthenticateRequest(r.Context(), s.pool, r)
	switch {
	case errors.Is(err, tenants.ErrNoBearer):
		return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "missing Authorization: Bearer <token>")
	case errors.Is(err, tenants.ErrMalformedBearer):
		return nil, errorf(http.StatusUnauthorized, codeUnauthenticated, "Authorization header: want Bearer <token>")
	case errors.Is(err, tenants.ErrInvalidToken):
		return nil, errorf(http.StatusUnauthorized, codeInvalidToken, "invalid or revoked token")
	case err != nil:
		return nil, err
	}
	return token, nil
}

// refreshNeeded is returned by Call.refreshFirst: mutate rolls the request's transaction back,
// reloads (with no connection held, so that a reload never waits for a second connection of the
// pool while this request holds one) and runs the handler again.
type refreshNeeded struct {
	what    string
	refresh func(ctx context.Context) error
}

func (e *refreshNeeded) Error() string { return "api: reload " + e.what + " first" }

// refreshFirst asks for a reload of what (by refresh) before the handler runs again, unless this
// call did it already: then it returns nil and the handler answers with what it has.
func (c *Call) refreshFirst(what string, refresh func(ctx context.Context) error) error {
	if c.refreshed[what] || refresh == nil {
		return nil
	}
	return &refreshNeeded{what: what, refresh: refresh}
}

// idempotency is a request's Idempotency-Key and the hash of the request it stands for.
type idempotency struct {
	key         string
	requestHash []byte
}

// idempotencyKey reads the request's Idempotency-Key header: nil without one. On a bad one it has
// answered (ok false).
func (s *Server) idempotencyKey(w http.ResponseWriter, r *http.Request, call *Call) (idem *idempotency, ok bool) {
	values, hasKey := r.Header["Idempotency-Key"]
	if !hasKey {
		return nil, true
	}
	key := strings.TrimSpace(values[0])
	if key == "" || len(key) > maxIdempotencyKeyLen || len(values) > 1 {
		s.writeError(w, r, badRequest(codeInvalidIdempotency, "Idempotency-Key: want one value of 1 to %d characters", maxIdempotencyKeyLen))
		return nil, false
	}
	if err := checkHeaderText(key); err != nil {
		s.writeError(w, r, badRequest(codeInvalidIdempotency, "Idempotency-Key: %v", err))
		return nil, false
	}
	return &idempotency{key: key, requestHash: hashRequest(r.Method, r.URL.Path, call.Body)}, true
}

// mutate runs fn in a transaction with the request's Idempotency-Key, if any: claimed first,
// replayed when taken, and stored with the response. When fn asks for a reload (refreshFirst), the
// transaction is rolled back, the reload done with no connection held, and fn run again in a new
// transaction. A transaction that Postgres aborts (deadlock, serialization) runs again (txn.Run).
func (s *Server) mutate(w http.ResponseWriter, r *http.Request, call *Call, fn mutationFunc) {
	idem, ok := s.idempotencyKey(w, r, call)
	if !ok {
		return
	}
	for {
		retry := s.mutateOnce(w, r, call, fn, idem)
		if retry == nil {
			return
		}
		if err := retry.refresh(r.Context()); err != nil {
			s.writeError(w, r, fmt.Errorf("reload %s: %w", retry.what, err))
			return
		}
		if call.refreshed == nil {
			call.refreshed = map[string]bool{}
		}
		call.refreshed[retry.what] = true
	}
}

// errKeyTaken rolls back a mutation whose Idempotency-Key another request holds: it is replayed.
var errKeyTaken = errors.New("api: idempotency key taken")

// notStored rolls back a mutation that answered other than 2xx: only successes are committed.
type notStored struct {
	status  int
	encoded []byte
}

func (e *notStored) Error() string { return fmt.Sprintf("api: answered %d: not committed", e.status) }

// mutateOnce is one attempt of mutate. It has answered unless it returns a reload to do first.
func (s *Server) mutateOnce(w http.ResponseWriter, r *http.Request, call *Call, fn mutationFunc, idem *idempotency) *refreshNeeded {
	ctx := r.Context()
	var (
		status  int
		encoded []byte
	)
	err := txn.Run(ctx, s.pool, s.logger, func(tx pgx.Tx) error {
		call.onCommit = nil // a run again starts from scratch
		q := dbsqlc.New(tx)
		if idem != nil {
			_, err := q.IdempotencyKeyClaim(ctx, dbsqlc.IdempotencyKeyClaimParams{
				TenantID: call.Tenant(), Key: idem.key, Method: r.Method, Path: r.URL.Path, RequestSha256: idem.requestHash,
				TtlSeconds: s.config.IdempotencyTTL.Seconds(),
			})
			if postgres.NoRows(err) {
				return errKeyTaken
			}
			if err != nil {
				return fmt.Errorf("claim idempotency key: %w", err)
			}
		}
		var (
			body any
			err  error
		)
		status, body, err = fn(ctx, tx, call)
		if err != nil {
			return err
		}
		if encoded, err = marshal(body); err != nil {
			return fmt.Errorf("encode response: %w", err)
		}
		if status < 200 || status > 299 {
			return &notStored{status: status, encoded: encoded}
		}
		if idem != nil {
			status32 := int32(status)
			if err := q.IdempotencyKeyComplete(ctx, dbsqlc.IdempotencyKeyCompleteParams{
				TenantID: call.Tenant(), Key: idem.key, Status: &status32, Response: encoded,
			}); err != nil {
				return fmt.Errorf("store idempotent response: %w", err)
			}
		}
		return nil
	})
	var (
		retry   *refreshNeeded
		refused *notStored
	)
	switch {
	case errors.As(err, &retry):
		return retry // rolled back before the reload
	case errors.Is(err, errKeyTaken):
		s.replay(w, r, call, idem)
	case errors.As(err, &refused):
		s.writeRaw(w, r, refused.status, refused.encoded)
	case err != nil:
		s.writeError(w, r, err)
	default:
		for _, fn := range call.onCommit {
			fn(ctx)
		}
		s.writeRaw(w, r, status, encoded)
	}
	return nil
}

// act runs fn with no transaction of the request's; with an Idempotency-Key, a stored response is
// replayed instead, and a successful response is stored after fn.
func (s *Server) act(w http.ResponseWriter, r *http.Request, call *Call, fn actionFunc) {
	ctx := r.Context()
	idem, ok := s.idempotencyKey(w, r, call)
	if !ok {
		return
	}
	if idem != nil {
		stored, err := dbsqlc.New(s.pool).IdempotencyKeyGet(ctx, dbsqlc.IdempotencyKeyGetParams{
			TenantID: call.Tenant(), Key: idem.key, TtlSeconds: s.config.IdempotencyTTL.Seconds(),
		})
		switch {
		case err == nil && stored.Status != nil:
			s.replay(w, r, call, idem)
			return
		case err != nil && !postgres.NoRows(err):
			s.writeError(w, r, fmt.Errorf("read idempotency key: %w", err))
			return
		}
	}
	status, body, err := fn(ctx, call)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	encoded, err := marshal(body)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	if idem != nil && status >= 200 && status <= 299 {
		stored, err := s.storeResponse(ctx, r, call, idem, status, encoded)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !stored {
			// Another request took the key meanwhile: answer as it did (or 422).
			s.replay(w, r, call, idem)
			return
		}
	}
	s.writeRaw(w, r, status, encoded)
}

// storeResponse claims the Idempotency-Key and stores the response in one transaction; false when
// the key is taken already.
func (s *Server) storeResponse(ctx context.Context, r *http.Request, call *Call, idem *idempotency, status int, encoded []byte) (bool, error) {
	stored := false
	err := txn.Run(ctx, s.pool, s.logger, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		_, err := q.IdempotencyKeyClaim(ctx, dbsqlc.IdempotencyKeyClaimParams{
			TenantID: call.Tenant(), Key: idem.key, Method: r.Method, Path: r.URL.Path, RequestSha256: idem.requestHash,
			TtlSeconds: s.config.IdempotencyTTL.Seconds(),
		})
		if postgres.NoRows(err) {
			stored = false
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		status32 := int32(status)
		if err := q.IdempotencyKeyComplete(ctx, dbsqlc.IdempotencyKeyCompleteParams{
			TenantID: call.Tenant(), Key: idem.key, Status: &status32, Response: encoded,
		}); err != nil {
			return fmt.Errorf("store idempotent response: %w", err)
		}
		stored = true
		return nil
	})
	return stored, err
}

// replay answers a request whose Idempotency-Key is taken: the stored response when the request is
// the same, 422 otherwise.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, call *Call, idem *idempotency) {
	key := idem.key
	stored, err := dbsqlc.New(s.pool).IdempotencyKeyGet(r.Context(), dbsqlc.IdempotencyKeyGetParams{
		TenantID: call.Tenant(), Key: key, TtlSeconds: s.config.IdempotencyTTL.Seconds(),
	})
	if postgres.NoRows(err) {
		// The key's TTL ended between its claim and this read: it is free now.
		apiErr := errorf(http.StatusServiceUnavailable, codeUnavailable,
			"Idempotency-Key %q expired while this request ran; send it again", key)
		apiErr.RetryAfter = time.Second
		s.writeError(w, r, apiErr)
		return
	}
	if err != nil {
		s.writeError(w, r, fmt.Errorf("read idempotency key: %w", err))
		return
	}
	if !bytes.Equal(stored.RequestSha256, idem.requestHash) {
		s.writeError(w, r, errorf(http.StatusUnprocessableEntity, codeIdempotencyKeyReused,
			"Idempotency-Key %q was used for another request (%s %s at %s); use a new key for a new request",
			key, stored.Method, stored.Path, stored.CreatedAt.UTC().Format(time.RFC3339)))
		return
	}
	if stored.Status == nil {
		s.writeError(w, r, fmt.Errorf("idempotency key %q committed without a response", key))
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	s.writeRaw(w, r, int(*stored.Status), stored.Response)
}

// hashRequest identifies a request for Idempotency-Key: method, path and the body as canonical
// JSON (object keys sorted, no insignificant space), or the raw body when it is not JSON.
func hashRequest(method, path string, body []byte) []byte {
	canonical := body
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if out, err := json.Marshal(v); err == nil {
			canonical = out
		}
	}
	h := sha256.New()
	h.Write([]byte(method + "\n" + path + "\n"))
	h.Write(canonical)
	return h.Sum(nil)
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, body any) {
	encoded, err := marshal(body)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	s.writeRaw(w, r, status, encoded)
}

// marshal encodes a response body as JSON without escaping <, > and & as \u003c and the like:
// bodies go to API clients and people's terminals, not into HTML.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (s *Server) writeRaw(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

// writeError answers err: an *Error as it is; a transaction Postgres kept aborting for concurrent
// work (txn.Transient, after txn.Run's retries) as 503 unavailable with Retry-After; a database
// that could not be reached as 503 database_unavailable with Retry-After; anything else as 500
// (logged, not shown).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiErr := asError(err)
	switch {
	case apiErr != nil:
	case dataException(err) != nil:
		s.logger.WarnContext(r.Context(), "api request refused by the database: a value the input checks let through", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		apiErr = dataException(err)
	case txn.Transient(err):
		// Run again already (txn.Run) and aborted every time: a deadlock, a lock held by a
		// migration past lock_timeout, a serialization failure. Nothing was written; retrying is safe.
		s.logger.WarnContext(r.Context(), "api request aborted by the database for concurrent work, after retries", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		apiErr = errBusyDatabase
	case databaseUnavailable(err):
		s.logger.WarnContext(r.Context(), "api request failed: database unavailable", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		apiErr = errDatabaseUnavailable
	default:
		s.logger.ErrorContext(r.Context(), "api request failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		apiErr = errorf(http.StatusInternalServerError, codeInternal, "internal error; the server log has the details")
		if id := httpobs.RequestID(r.Context()); id != "" {
			apiErr.Message += " under request_id " + id
		}
	}
	if apiErr.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(apiErr.RetryAfter))
	}
	encoded, _ := marshal(errorBody{Error: errorDetail{Code: apiErr.Code, Message: apiErr.Message, RequestID: httpobs.RequestID(r.Context())}})
	s.writeRaw(w, r, apiErr.Status, encoded)
}
