package api

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/internal/jsonx"
)

// The boundary. Everything a request brings from outside — path values, query parameters,
// headers, the body — is checked here, once, before a handler sees it: text is UTF-8 without NUL,
// and JSON is what Postgres's jsonb stores (internal/jsonx: no \u0000, no lone surrogates, numbers
// within numeric's range, no repeated keys) with field names exactly as documented. A request that
// fails gets 400 naming the field and changes nothing. Handlers still check their fields' meaning
// and size; dataException (writeError) is the net under all of it.

// wildcardRE finds the wildcards of a route pattern: "{id}", "{path...}".
var wildcardRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(?:\.\.\.)?\}`)

// checkRequest checks r's path values and query parameters, and body, a JSON request body (nil
// for a request without one).
func checkRequest(r *http.Request, body []byte) error {
	for _, m := range wildcardRE.FindAllStringSubmatch(r.Pattern, -1) {
		if err := jsonx.CheckText(r.PathValue(m[1])); err != nil {
			return badRequest(codeInvalidParameter, "path value %s: %v", m[1], err)
		}
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest(codeInvalidParameter, "query string: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(query)) {
		if err := jsonx.CheckText(name); err != nil {
			return badRequest(codeInvalidParameter, "query parameter name %q: %v", name, err)
		}
		for _, value := range query[name] {
			if err := jsonx.CheckText(value); err != nil {
				return badRequest(codeInvalidParameter, "query parameter %q: %v", name, err)
			}
		}
	}
	if len(body) > 0 && json.Valid(body) { // malformed JSON is Decode's to report
		var bad *jsonx.Error
		if err := jsonx.CheckStrict(body); errors.As(err, &bad) {
			if bad.Path == "" {
				return badRequest(codeInvalidRequest, "request body: %s", bad.Problem)
			}
			return badRequest(codeInvalidRequest, "field %q: %s", bad.Path, bad.Problem)
		}
	}
	return nil
}

// checkHeaderText checks a header value that reaches Postgres (Idempotency-Key): visible text,
// UTF-8 without control characters.
func checkHeaderText(value string) error {
	if err := jsonx.CheckText(value); err != nil {
		return err
	}
	if i := strings.IndexFunc(value, func(r rune) bool { return r < ' ' || r == 0x7f }); i >= 0 {
		return errors.New("contains a control character")
	}
	return nil
}

// dataException turns a Postgres data exception (SQLSTATE class 22: a value it cannot store, such
// as text with NUL or a number out of range) into 400: the request carried it. checkRequest and the
// handlers' own checks should have refused it first; this is the net under them.
func dataException(err error) *Error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "22") {
		return nil
	}
	return badRequest(codeInvalidRequest, "a value in the request cannot be stored: %s", pgErr.Message)
}
