package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/reckonhq/reckon/cmd/server/internal/httpobs"
	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/saga"
)

// role is the least role a route needs.
type role int

const (
	roleViewer role = iota
	roleOperator
	roleAdmin
)

func (r role) allows(op *operator.Operator) bool {
	switch r {
	case roleAdmin:
		return op.IsAdmin()
	case roleOperator:
		return op.CanAct()
	default:
		return true
	}
}

// maxValueBytes bounds a query or form value; maxFormBytes a form body.
const (
	maxValueBytes = 2048
	maxFormBytes  = 1 << 20
)

// request is what a handler gets: the HTTP request, the response writer, and — past the
// sign-in — the session, its operator and the scope it reads and acts in.
type request struct {
	*http.Request
	w       http.ResponseWriter
	session *operator.Session
	scope   ops.Scope
}

func (r *request) ctx() context.Context { return r.Context() }

func (r *request) operator() *operator.Operator { return r.session.Operator }

// actor is the audit trail's actor of the operator's actions: "console:{name}" (recorded by the
// effects package as "operator:console:{name}").
func (r *request) actor() string { return "console:" + r.session.Operator.Name }

// redirect answers 303 See Other to path.
func (r *request) redirect(path string) error {
	http.Redirect(r.w, r.Request, path, http.StatusSeeOther)
	return nil
}

// httpError is an answer other than 200, rendered as an error page.
type httpError struct {
	status  int
	field   string // the input at fault, for 400
	message string
}

func (e *httpError) Error() string {
	if e.field != "" {
		return e.field + ": " + e.message
	}
	return e.message
}

var (
	errNotFound  = &httpError{status: http.StatusNotFound, message: "There is nothing here, or it is outside the tenants you see."}
	errForbidden = &httpError{status: http.StatusForbidden, message: "Your role does not allow this."}
)

// badField is a 400 naming the field at fault.
func badField(field, format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, field: field, message: fmt.Sprintf(format, args...)}
}

func forbidden(message string) error {
	return &httpError{status: http.StatusForbidden, message: message}
}

// checkValues refuses a value that is not UTF-8, holds NUL or is longer than maxValueBytes,
// naming its field. kind is "query parameter" or "form field".
func checkValues(values url.Values) error {
	for name, list := range values {
		if err := jsonx.CheckText(name); err != nil {
			return badField("parameter name", "%v", err)
		}
		for _, value := range list {
			if err := jsonx.CheckText(value); err != nil {
				return badField(name, "%v", err)
			}
			if len(value) > maxValueBytes {
				return badField(name, "longer than %d bytes", maxValueBytes)
			}
		}
	}
	return nil
}

// checkQuery refuses a query string that does not parse, whose values checkValues refuses, or
// that gives a parameter twice.
func checkQuery(r *http.Request) error {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badField("query string", "%v", err)
	}
	if err := checkValues(values); err != nil {
		return err
	}
	return checkRepeats(values, "")
}

// checkRepeats refuses a parameter given more than once (rather than reading its first value),
// but the one named may repeat.
func checkRepeats(values url.Values, may string) error {
	for name, list := range values {
		if len(list) > 1 && name != may {
			return badField(name, "given %d times", len(list))
		}
	}
	return nil
}

// checkPath refuses path values that are not UTF-8 or hold NUL, naming the value.
func checkPath(r *http.Request, names ...string) error {
	for _, name := range names {
		value := r.PathValue(name)
		if err := jsonx.CheckText(value); err != nil {
			return badField(name, "%v", err)
		}
		if len(value) > maxValueBytes {
			return badField(name, "longer than %d bytes", maxValueBytes)
		}
	}
	return nil
}

// pathNames lists the wildcards of the routes, checked on every request.
var pathNames = []string{"id", "tenant", "session", "name"}

// public serves a page that needs no session (sign-in).
func (c *Console) public(handle func(*request) error) http.Handler {
	return secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{Request: r, w: w}
		err := checkPath(r, pathNames...)
		if err == nil {
			err = checkQuery(r)
		}
		if err == nil {
			err = handle(req)
		}
		c.finish(req, err)
	}), true)
}

// view serves a GET page that needs a session and at least role.
func (c *Console) view(least role, handle func(*request) error) http.Handler {
	return secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{Request: r, w: w}
		if !c.authenticate(req) {
			return
		}
		err := checkPath(r, pathNames...)
		if err == nil {
			err = checkQuery(r)
		}
		if err == nil && !least.allows(req.operator()) {
			err = errForbidden
		}
		if err == nil {
			err = handle(req)
		}
		c.finish(req, err)
	}), true)
}

// action serves a POST form that needs a session, at least role, a same-origin request and the
// session's CSRF token in the field "csrf". Anything missing is 403 and nothing is done.
func (c *Console) action(least role, handle func(*request) error) http.Handler {
	return secured(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{Request: r, w: w}
		if err := sameOrigin(r); err != nil {
			c.finish(req, err)
			return
		}
		if !c.authenticate(req) {
			return
		}
		c.finish(req, c.checkForm(req, least, handle))
	}), true)
}

func (c *Console) checkForm(req *request, least role, handle func(*request) error) error {
	if err := parseForm(req); err != nil {
		return err
	}
	if !operator.ValidCSRF(req.session, req.PostForm.Get("csrf")) {
		return forbidden("The form's CSRF token is missing or wrong (the page may be from an older session): reload the page and try again.")
	}
	if !least.allows(req.operator()) {
		return errForbidden
	}
	if err := checkPath(req.Request, pathNames...); err != nil {
		return err
	}
	return handle(req)
}

// parseForm reads a urlencoded form body of at most maxFormBytes and checks its values.
func parseForm(req *request) error {
	req.Body = http.MaxBytesReader(req.w, req.Body, maxFormBytes)
	if err := req.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{status: http.StatusRequestEntityTooLarge, message: "The form is too large."}
		}
		return badField("form", "%v", err)
	}
	if err := checkQuery(req.Request); err != nil {
		return err
	}
	if err := checkValues(req.PostForm); err != nil {
		return err
	}
	return checkRepeats(req.PostForm, "id") // the bulk form's effect ids
}

// sameOrigin refuses a POST that a browser says comes from another site (Sec-Fetch-Site) or whose
// Origin is not this host.
func sameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return forbidden("Cross-site form posts are refused.")
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return forbidden("The form was posted from another origin.")
		}
	}
	return nil
}

// finish renders err (nil: the handler answered already) as an error page.
func (c *Console) finish(req *request, err error) {
	if err == nil {
		return
	}
	var he *httpError
	var fe *ops.FieldError
	switch {
	case errors.As(err, &he):
	case errors.As(err, &fe):
		he = &httpError{status: http.StatusBadRequest, field: fe.Field, message: fe.Message}
	case errors.Is(err, ops.ErrNotFound), errors.Is(err, effects.ErrNotFound), errors.Is(err, saga.ErrNotFound),
		errors.Is(err, effects.ErrRunNotFound), errors.Is(err, operator.ErrNotFound):
		he = errNotFound
	case errors.Is(err, effects.ErrNotStuck), errors.Is(err, effects.ErrNotCancellable),
		errors.Is(err, saga.ErrNotStuck), errors.Is(err, saga.ErrResolveEffect):
		he = &httpError{status: http.StatusConflict, message: err.Error()}
	case errors.Is(err, effects.ErrNotFailed), ops.RedriveRefused(err):
		he = &httpError{status: http.StatusConflict, message: "This effect cannot be redriven: " + strings.TrimPrefix(err.Error(), "effects: ")}
	case errors.Is(err, effects.ErrNotAwaitingConfirmation):
		he = &httpError{status: http.StatusConflict, message: "This effect does not await a confirmation (any more): " +
			"it was confirmed or declined already, its confirmation expired, or it was cancelled. Its page shows what happened."}
	case errors.Is(err, effects.ErrFourEyes):
		he = &httpError{status: http.StatusConflict, message: "Four eyes: this effect was enqueued by you (operator:" + req.actor() +
			"), so someone else must confirm it. You may still decline it."}
	case errors.Is(err, context.Canceled):
		return
	default:
		c.logger.ErrorContext(req.ctx(), "console request failed", slog.String("method", req.Method),
			slog.String("path", req.URL.Path), slog.Any("error", err))
		he = &httpError{status: http.StatusInternalServerError, message: "Something went wrong on our side; it is in the server's log."}
	}
	c.render(req, he.status, "error", pageTitle(he.status), errorData{
		Status: he.status, Field: he.field, Message: he.message, RequestID: httpobs.RequestID(req.ctx()),
	})
}

// errorData is the error page's. RequestID is the request's X-Request-Id, which its log lines
// carry too ("" outside the server's handler).
type errorData struct {
	Status                    int
	Field, Message, RequestID string
}

func pageTitle(status int) string {
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

// secured sets the headers every console answer carries; pages (not the stylesheet) are not
// cached.
func secured(next http.Handler, page bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if page {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}
