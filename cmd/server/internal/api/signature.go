package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Signed callbacks (docs/async.md). An upstream that accepted an effect settles it with no API
// token: it signs its callback with the effect's callback secret, which it was given with the
// dispatch (Reckon-Callback-Secret). The request carries
//
//	Reckon-Effect-Id: <effect id>
//	Reckon-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//
// and no Authorization header. The signature is a capability for that one effect: it settles no
// other (CallbackOpts.EffectID), it is accepted within signatureTolerance of its timestamp, either
// way, and only once (reckon_callback_signatures, written in the callback's own transaction).

// signatureTolerance is how far a signature's timestamp may be from the server's clock, in the
// past or the future.
const signatureTolerance = 5 * time.Minute

// maxSignatureHeader bounds the Reckon-Signature header read.
const maxSignatureHeader = 512

// signaturesPrunedPerCallback is how many expired signatures each signed callback deletes.
const signaturesPrunedPerCallback = 16

// callbackRoute is the one route that takes signed requests.
const callbackRoute = "POST /v1/callbacks/{correlation_id}"

// signature is a verified Reckon-Signature: the effect it is for, its timestamp (as sent, and in
// unix seconds) and its MAC.
type signature struct {
	effectID  uuid.UUID
	t         string
	timestamp int64
	mac       []byte
}

// signatureKey is the context key of a request's verified signature.
type signatureKey struct{}

// signedCallback reports whether r is a callback that authenticates by signature: it carries
// Reckon-Signature. Every other request, a callback without one included, needs a bearer token.
func signedCallback(r *http.Request) bool {
	return r.Pattern == callbackRoute && len(r.Header.Values(httpconn.HeaderSignature)) > 0
}

// beginSigned is begin for a signed callback: the body is read as any request's, the request is
// authenticated by its signature instead of a token, then checked as any request is. The call's
// token stands for the signature: the effect's tenant, no admin or system rights. On failure it
// has answered.
func (s *Server) beginSigned(w http.ResponseWriter, r *http.Request) (*Call, bool) {
	body, err := s.readBody(w, r)
	var token *tenants.Token
	if err == nil {
		token, r, err = s.verifySignature(r, body)
	}
	if err == nil {
		err = checkRequest(r, body)
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil, false
	}
	return &Call{Request: r, Token: token, Body: body}, true
}

// verifySignature authenticates a signed callback: it returns the token that stands for it and r
// with the signature in its context (signatureOf). Errors are 401 invalid_signature (no effect id,
// a malformed header, a signature that does not match), 401 signature_expired (a matching
// signature whose timestamp is out of the window) and 400 invalid_request (a bearer token as
// well). An unknown effect id gets invalid_signature like a wrong signature: nobody holds its
// secret.
func (s *Server) verifySignature(r *http.Request, body []byte) (*tenants.Token, *http.Request, error) {
	ctx := r.Context()
	if len(r.Header.Values("Authorization")) > 0 {
		return nil, r, badRequest(codeInvalidRequest, "a signed callback (%s) carries no Authorization header", httpconn.HeaderSignature)
	}
	effectID, ok := parseEffectID(r.Header.Values(httpconn.HeaderEffectID))
	if !ok {
		return nil, r, invalidSignature("%s: want one header, the id of the effect (a UUID) the callback is for", httpconn.HeaderEffectID)
	}
	sig, err := parseSignature(r.Header.Values(httpconn.HeaderSignature))
	if err != nil {
		return nil, r, invalidSignature("%s: %v; want t=<unix seconds>,v1=<hex HMAC-SHA256>", httpconn.HeaderSignature, err)
	}
	sig.effectID = effectID
	secret, err := s.effects.CallbackSecret(ctx, effectID)
	if err != nil {
		return nil, r, err
	}
	if !hmac.Equal(sig.mac, callbackMAC(secret, sig.t, body)) {
		return nil, r, invalidSignature("%s does not match: sign \"<t>.<raw body>\" with effect %s's callback secret", httpconn.HeaderSignature, effectID)
	}
	now := time.Now().Unix()
	if tolerance := int64(signatureTolerance / time.Second); sig.timestamp < now-tolerance || sig.timestamp > now+tolerance {
		return nil, r, errorf(http.StatusUnauthorized, codeSignatureExpired,
			"%s: t=%d is %ds from the server's clock; a signature is valid for %s either way: sign the delivery again",
			httpconn.HeaderSignature, sig.timestamp, sig.timestamp-now, signatureTolerance)
	}
	effect, err := s.effects.Get(ctx, effectID)
	if errors.Is(err, effects.ErrNotFound) {
		return nil, r, invalidSignature("%s: no effect %s", httpconn.HeaderEffectID, effectID)
	}
	if err != nil {
		return nil, r, err
	}
	token := &tenants.Token{TenantID: effect.TenantID, Name: "signed-callback"}
	return token, r.WithContext(context.WithValue(ctx, signatureKey{}, sig)), nil
}

func invalidSignature(format string, args ...any) *Error {
	return errorf(http.StatusUnauthorized, codeInvalidSignature, format, args...)
}

// parseEffectID parses the Reckon-Effect-Id header: one UUID in its canonical form.
func parseEffectID(values []string) (uuid.UUID, bool) {
	if len(values) != 1 || len(values[0]) != 36 {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(values[0])
	return id, err == nil
}

// parseSignature parses the Reckon-Signature header: comma-separated key=value pairs, exactly one
// t (unix seconds) and one v1 (64 hex digits); other keys are ignored, for schemes to come.
func parseSignature(values []string) (*signature, error) {
	if len(values) != 1 {
		return nil, errors.New("want one header")
	}
	if len(values[0]) > maxSignatureHeader {
		return nil, fmt.Errorf("longer than %d bytes", maxSignatureHeader)
	}
	var sig signature
	seen := map[string]bool{}
	for part := range strings.SplitSeq(values[0], ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		if key != "t" && key != "v1" {
			continue
		}
		if seen[key] {
			return nil, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "t":
			sig.t = value
			sig.timestamp, err = strconv.ParseInt(value, 10, 64)
			if err != nil || sig.timestamp <= 0 || strings.Trim(value, "0123456789") != "" {
				return nil, fmt.Errorf("t=%q is not unix seconds", value)
			}
		case "v1":
			sig.mac, err = hex.DecodeString(value)
			if err != nil || len(sig.mac) != sha256.Size {
				return nil, fmt.Errorf("v1 is not %d hex digits", 2*sha256.Size)
			}
		}
	}
	if !seen["t"] || !seen["v1"] {
		return nil, errors.New("t and v1 are required")
	}
	return &sig, nil
}

// callbackMAC is the v1 signature of a callback: HMAC-SHA256 keyed with the secret (its text, as
// the upstream received it) of "<t>.<body>", t as the header gave it.
func callbackMAC(secret, t string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "."))
	mac.Write(body)
	return mac.Sum(nil)
}

// signatureOf is the verified signature of a signed callback; nil for a call with a token.
func signatureOf(call *Call) *signature {
	sig, _ := call.Request.Context().Value(signatureKey{}).(*signature)
	return sig
}

// errReplayed refuses a signature that a committed callback used already.
var errReplayed = errorf(http.StatusConflict, codeCallbackReplayed,
	"this %s was used already: sign each delivery afresh (a new t)", httpconn.HeaderSignature)

// useSignature records sig as used, in tx, the callback's transaction, and prunes a few expired
// signatures. A signature already used is errReplayed; a concurrent callback with the same one
// waits for the other's transaction, so exactly one of them gets through.
func useSignature(ctx context.Context, tx pgx.Tx, sig *signature) error {
	q := dbsqlc.New(tx)
	n, err := q.CallbackSignatureUse(ctx, dbsqlc.CallbackSignatureUseParams{
		Signature: sig.mac, EffectID: sig.effectID,
		ExpiresAt: time.Unix(sig.timestamp, 0).Add(signatureTolerance),
	})
	if err != nil {
		return fmt.Errorf("record callback signature: %w", err)
	}
	if n == 0 {
		return errReplayed
	}
	if _, err := q.CallbackSignaturePrune(ctx, dbsqlc.CallbackSignaturePruneParams{Now: time.Now(), MaxRows: signaturesPrunedPerCallback}); err != nil {
		return fmt.Errorf("prune callback signatures: %w", err)
	}
	return nil
}
