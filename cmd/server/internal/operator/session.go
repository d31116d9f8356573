package operator

import (
	"context"
	"crypto/subtle"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/cmd/server/internal/secret"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Session is a console session of an operator.
type Session struct {
	// ID is the session cookie's value: 32 random bytes in base64url. Only its SHA-256 is stored.
	ID       string
	Operator *Operator
	// CSRF is the session's CSRF token (random): every form of the session carries it, and a POST
	// without it is refused (ValidCSRF).
	CSRF      string
	ExpiresAt time.Time
}

// MaxSessionTTL bounds the lifetime of a session.
const MaxSessionTTL = 90 * 24 * time.Hour

// pruneAtSignIn is how many expired sessions a sign-in deletes at most.
const pruneAtSignIn = 100

// SignIn authenticates token and starts a session of its operator that lasts ttl (by the
// database's clock). It first deletes up to 100 expired sessions, of any operator. Errors:
// ErrUnauthorized (as for Authenticate), ErrInvalid for a ttl not in (0, MaxSessionTTL].
func (s *Store) SignIn(ctx context.Context, token string, ttl time.Duration) (*Session, error) {
	if ttl <= 0 || ttl > MaxSessionTTL {
		return nil, fmt.Errorf("%w: session ttl %v: want more than 0 and at most %v", ErrInvalid, ttl, MaxSessionTTL)
	}
	op, err := s.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	q := dbsqlc.New(s.pool)
	if _, err := q.OperatorSessionPruneExpired(ctx, dbsqlc.OperatorSessionPruneExpiredParams{MaxRows: pruneAtSignIn}); err != nil {
		return nil, fmt.Errorf("operator: delete expired sessions: %w", err)
	}
	id, err := secret.New("")
	if err != nil {
		return nil, fmt.Errorf("operator: sign in %s: %w", op.Name, err)
	}
	csrf, err := secret.New("")
	if err != nil {
		return nil, fmt.Errorf("operator: sign in %s: %w", op.Name, err)
	}
	expiresAt, err := q.OperatorSessionInsert(ctx, dbsqlc.OperatorSessionInsertParams{
		IDSha256: id.SHA256, OperatorID: op.ID, Csrf: csrf.Value, TtlSeconds: ttl.Seconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("operator: sign in %s: %w", op.Name, err)
	}
	return &Session{ID: id.Value, Operator: op, CSRF: csrf.Value, ExpiresAt: expiresAt}, nil
}

// Session returns the session whose cookie value is id, with its operator as it is now. Errors:
// ErrUnauthorized for a malformed, unknown or expired id, or when its operator was revoked.
func (s *Store) Session(ctx context.Context, id string) (*Session, error) {
	if !secret.WellFormed(id, "") {
		return nil, ErrUnauthorized
	}
	row, err := dbsqlc.New(s.pool).OperatorSessionGet(ctx, secret.Hash(id))
	if postgres.NoRows(err) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("operator: read session: %w", err)
	}
	return &Session{ID: id, Operator: operatorFromRow(row.ReckonOperator), CSRF: row.Csrf, ExpiresAt: row.ExpiresAt}, nil
}

// SignOut ends the session whose cookie value is id. An unknown, expired or malformed id is no
// error: there is nothing to end.
func (s *Store) SignOut(ctx context.Context, id string) error {
	if !secret.WellFormed(id, "") {
		return nil
	}
	if err := dbsqlc.New(s.pool).OperatorSessionDelete(ctx, secret.Hash(id)); err != nil {
		return fmt.Errorf("operator: sign out: %w", err)
	}
	return nil
}

// ValidCSRF reports whether token is sess's CSRF token, comparing in constant time. A nil session
// or an empty token is never valid.
func ValidCSRF(sess *Session, token string) bool {
	if sess == nil || sess.CSRF == "" || token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(sess.CSRF), []byte(token)) == 1
}
