// Package console is the operators' console: server-rendered pages under /console on the server
// (html/template, assets embedded in the binary, no JavaScript) over package ops, signed in with
// an operator token (package operator). docs/console.md describes the pages, roles and security.
//
// Every page but the sign-in form and the stylesheet needs a session (a cookie); every form that
// changes something carries the session's CSRF token and is refused (403, nothing changed) without
// it, from another origin, or from a viewer. A scoped operator sees its tenants only: lists leave
// the others out and their detail pages are 404, exactly like missing ones.
package console

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/internal/conf"
)

// DefaultSessionTTL is how long a console session lasts by default.
const DefaultSessionTTL = 12 * time.Hour

// Config configures a Console. Ops and Operators are required.
type Config struct {
	// Ops reads and acts for the console. Required.
	Ops *ops.Ops
	// Operators authenticates the sign-in tokens and keeps the sessions. Required.
	Operators *operator.Store
	// Logger receives the errors behind 500 pages. Default: discard.
	Logger *slog.Logger
	// SessionTTL is how long a session lasts after sign-in. Default DefaultSessionTTL (12h).
	SessionTTL time.Duration
	// Now is the clock for the ages shown ("stuck for 3h12m"). Default time.Now.
	Now func() time.Time
	// SecureCookies marks the console's cookies Secure even on a request that came over plain
	// HTTP: for a server behind a proxy that terminates TLS, so that the browser sends them over
	// HTTPS only. Default false: Secure only on a request that came over TLS.
	SecureCookies bool
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports a missing Ops or Operators or a SessionTTL out of range (a minute to 30 days).
func (c *Config) Validate() error {
	switch {
	case c.Ops == nil:
		return errors.New("console: Config.Ops is required")
	case c.Operators == nil:
		return errors.New("console: Config.Operators is required")
	case c.SessionTTL < time.Minute || c.SessionTTL > 30*24*time.Hour:
		return errors.New("console: Config.SessionTTL must be between 1m and 720h")
	}
	return nil
}

// Console serves the operators' console. It is safe for concurrent use.
type Console struct {
	config    Config
	pages     pages
	static    http.Handler
	ops       *ops.Ops
	operators *operator.Store
	logger    *slog.Logger
}

// New returns the console of config (copied; defaults applied, then validated).
func New(config *Config) (*Console, error) {
	c, err := conf.Resolve(config, (*Config).setDefaults)
	if err != nil {
		return nil, err
	}
	templates, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{
		config: c, pages: templates, static: staticHandler(),
		ops: c.Ops, operators: c.Operators, logger: c.Logger,
	}, nil
}

// Register mounts the console on mux: everything under /console/, and GET / redirecting there.
func (c *Console) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusFound)
	})
	mux.Handle("GET /console/static/", secured(c.static, false))
	mux.Handle("GET /console/sign-in", c.public(c.signInForm))
	mux.Handle("POST /console/sign-in", c.public(c.signIn))
	mux.Handle("POST /console/sign-out", c.action(roleViewer, c.signOut))

	mux.Handle("GET /console/{$}", c.view(roleViewer, c.landing))
	mux.Handle("GET /console/overview", c.view(roleViewer, c.overview))
	mux.Handle("GET /console/stuck", c.view(roleViewer, c.stuck))
	mux.Handle("GET /console/awaiting", c.view(roleViewer, c.awaiting))
	mux.Handle("GET /console/effects", c.view(roleViewer, c.effectList))
	mux.Handle("GET /console/effects/{id}", c.view(roleViewer, c.effectPage))
	mux.Handle("POST /console/effects/{id}/resolve", c.action(roleOperator, c.resolveEffect))
	mux.Handle("POST /console/effects/{id}/cancel", c.action(roleOperator, c.decideEffect(c.ops.Cancel, "cancelled")))
	mux.Handle("POST /console/effects/{id}/confirm", c.action(roleOperator, c.decideEffect(c.ops.Confirm, "confirmed")))
	mux.Handle("POST /console/effects/{id}/decline", c.action(roleOperator, c.decideEffect(c.ops.Decline, "declined")))
	mux.Handle("POST /console/effects/{id}/redrive", c.action(roleOperator, c.decideEffect(c.ops.Redrive, "redriven")))
	mux.Handle("GET /console/bulk", c.view(roleOperator, c.bulkPreview))
	mux.Handle("POST /console/bulk", c.action(roleOperator, c.bulkResolve))
	mux.Handle("GET /console/sagas", c.view(roleViewer, c.sagaList))
	mux.Handle("GET /console/sagas/{id}", c.view(roleViewer, c.sagaPage))
	mux.Handle("POST /console/sagas/{id}/resolve", c.action(roleOperator, c.resolveSaga))
	mux.Handle("GET /console/runs", c.view(roleViewer, c.runList))
	mux.Handle("GET /console/runs/{tenant}/{id}", c.view(roleViewer, c.runPage))
	mux.Handle("POST /console/runs/{tenant}/{id}/cancel", c.action(roleOperator, c.cancelRun))
	mux.Handle("GET /console/sessions", c.view(roleViewer, c.sessionList))
	mux.Handle("GET /console/sessions/{session}", c.view(roleViewer, c.sessionPage))
	mux.Handle("GET /console/schedules", c.view(roleViewer, c.scheduleList))
	mux.Handle("GET /console/connectors", c.view(roleViewer, c.connectorList))
	mux.Handle("GET /console/connectors/{name}", c.view(roleViewer, c.connectorPage))
	mux.Handle("POST /console/connectors/{name}/limit", c.action(roleOperator, c.setLimit))
	mux.Handle("POST /console/connectors/{name}/limit/clear", c.action(roleOperator, c.changeLimit(c.ops.ClearLimit, "cleared", "not-set")))
	mux.Handle("POST /console/connectors/{name}/limit/reset", c.action(roleOperator, c.changeLimit(c.ops.ResetLimit, "reset", "not-throttled")))
	mux.Handle("POST /console/connectors/{name}/pause", c.action(roleOperator, c.pauseConnector))
	mux.Handle("POST /console/connectors/{name}/resume", c.action(roleOperator, c.resumeConnector))
	mux.Handle("GET /console/operators", c.view(roleAdmin, c.operatorList))
	mux.Handle("POST /console/operators/{name}/revoke", c.action(roleAdmin, c.revokeOperator))
	mux.Handle("/console/", c.view(roleViewer, func(*request) error { return errNotFound }))
}
