package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

const (
	// sessionCookie holds the session id; Path /console, HttpOnly, SameSite=Strict, Secure (see
	// secure), expiring with the session.
	sessionCookie = "reckon_console"
	// signInCookie holds the sign-in form's CSRF token (double submit), for ten minutes.
	signInCookie = "reckon_console_sign_in"
	signInTTL    = 10 * time.Minute
	// maxTokenBytes bounds a pasted operator token.
	maxTokenBytes = 256
)

// authenticate finds the request's session. Without a valid one it sends the browser to the
// sign-in page (clearing a stale cookie) and reports false; a database error is a 500 page.
func (c *Console) authenticate(req *request) bool {
	cookie, err := req.Cookie(sessionCookie)
	if err == nil && cookie.Value != "" && len(cookie.Value) <= maxTokenBytes {
		req.session, err = c.operators.Session(req.ctx(), cookie.Value)
		switch {
		case err == nil:
			req.scope.Tenants = req.session.Operator.Tenants
			return true
		case !errors.Is(err, operator.ErrUnauthorized):
			c.finish(req, err)
			return false
		}
		c.clearCookie(req, sessionCookie, "/console")
	}
	http.Redirect(req.w, req.Request, "/console/sign-in", http.StatusSeeOther)
	return false
}

// signInData is the sign-in page's.
type signInData struct {
	CSRF    string
	Problem string
}

// signInForm shows the sign-in form, with a fresh double-submit CSRF token in a cookie and in the
// form; a browser already signed in goes to the console.
func (c *Console) signInForm(req *request) error {
	if cookie, err := req.Cookie(sessionCookie); err == nil && cookie.Value != "" && len(cookie.Value) <= maxTokenBytes {
		if _, err := c.operators.Session(req.ctx(), cookie.Value); err == nil {
			return req.redirect("/console/")
		}
	}
	return c.renderSignIn(req, http.StatusOK, "")
}

func (c *Console) renderSignIn(req *request, status int, problem string) error {
	token := randomToken()
	http.SetCookie(req.w, &http.Cookie{
		Name: signInCookie, Value: token, Path: "/console/sign-in", MaxAge: int(signInTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(req),
	})
	c.render(req, status, "sign-in", "Sign in", signInData{CSRF: token, Problem: problem})
	return nil
}

// signIn checks the form's double-submit token and the operator token, then starts a session.
// A wrong, revoked or malformed token is 401 with the form again.
func (c *Console) signIn(req *request) error {
	if err := sameOrigin(req.Request); err != nil {
		return err
	}
	if err := parseForm(req); err != nil {
		return err
	}
	cookie, err := req.Cookie(signInCookie)
	form := req.PostForm.Get("csrf")
	if err != nil || cookie.Value == "" || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(form)) != 1 {
		return forbidden("The sign-in form expired or did not come from this console: reload it and sign in again.")
	}
	token := req.PostForm.Get("token")
	if token == "" {
		return c.renderSignIn(req, http.StatusUnauthorized, "Paste an operator token.")
	}
	if len(token) > maxTokenBytes {
		return badField("token", "longer than %d bytes", maxTokenBytes)
	}
	session, err := c.operators.SignIn(req.ctx(), token, c.config.SessionTTL)
	if errors.Is(err, operator.ErrUnauthorized) {
		return c.renderSignIn(req, http.StatusUnauthorized, "That token is not valid, or it was revoked.")
	}
	if err != nil {
		return err
	}
	c.clearCookie(req, signInCookie, "/console/sign-in")
	http.SetCookie(req.w, &http.Cookie{
		Name: sessionCookie, Value: session.ID, Path: "/console", Expires: session.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(req),
	})
	return req.redirect("/console/")
}

// signOut ends the session.
func (c *Console) signOut(req *request) error {
	if err := c.operators.SignOut(req.ctx(), req.session.ID); err != nil {
		return err
	}
	c.clearCookie(req, sessionCookie, "/console")
	return req.redirect("/console/sign-in")
}

// secure reports whether the console's cookies are Secure on req: when it came over TLS, or always
// with Config.SecureCookies (TLS ends at a proxy in front of the server).
func (c *Console) secure(req *request) bool { return req.TLS != nil || c.config.SecureCookies }

func (c *Console) clearCookie(req *request, name, path string) {
	http.SetCookie(req.w, &http.Cookie{
		Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(req),
	})
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
