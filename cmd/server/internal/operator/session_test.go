package operator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

// SignIn starts a session that Session finds by its cookie value, with its operator and CSRF
// token; only the id's SHA-256 is stored; SignOut ends it.
func TestSignInLookupSignOut(t *testing.T) {
	h := setup(t)
	token, ann := h.add("ann", operator.RoleOperator, []string{"acme"})

	before := time.Now()
	sess, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	require.Len(t, sess.ID, 43)
	require.NotEmpty(t, sess.CSRF)
	require.NotEqual(t, sess.ID, sess.CSRF)
	require.Equal(t, ann, sess.Operator)
	require.WithinDuration(t, before.Add(time.Hour), sess.ExpiresAt, 5*time.Second)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operator_sessions WHERE id_sha256 = sha256(convert_to($1, 'UTF8'))`, sess.ID))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_operator_sessions s WHERE strpos(row_to_json(s)::text, $1) > 0`, sess.ID))

	other, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, sess.ID, other.ID)
	require.NotEqual(t, sess.CSRF, other.CSRF)

	found, err := h.store.Session(h.ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, sess.ID, found.ID)
	require.Equal(t, sess.CSRF, found.CSRF)
	require.Equal(t, ann, found.Operator)
	require.True(t, sess.ExpiresAt.Equal(found.ExpiresAt))

	require.NoError(t, h.store.SignOut(h.ctx, sess.ID))
	_, err = h.store.Session(h.ctx, sess.ID)
	require.ErrorIs(t, err, operator.ErrUnauthorized)
	require.NoError(t, h.store.SignOut(h.ctx, sess.ID), "signing out twice is no error")
	require.NoError(t, h.store.SignOut(h.ctx, "not\x00a session"))
	_, err = h.store.Session(h.ctx, other.ID)
	require.NoError(t, err, "the other session goes on")
}

// SignIn refuses what Authenticate refuses, and a ttl out of range, starting no session.
func TestSignInRefused(t *testing.T) {
	h := setup(t)
	token, _ := h.add("ann", operator.RoleViewer, nil)
	for _, bad := range []string{"", "rko_" + strings.Repeat("A", 43), token + "\x00", token[:30] + "\xff" + token[31:]} {
		_, err := h.store.SignIn(h.ctx, bad, time.Hour)
		require.ErrorIs(t, err, operator.ErrUnauthorized, "%q", bad)
	}
	for _, ttl := range []time.Duration{0, -time.Second, operator.MaxSessionTTL + time.Second} {
		_, err := h.store.SignIn(h.ctx, token, ttl)
		require.ErrorIs(t, err, operator.ErrInvalid, ttl)
		require.Contains(t, err.Error(), "session ttl")
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_operator_sessions`))
}

// A session is refused once it expires, and expired sessions are deleted at the next sign-in,
// at most 100 at a time.
func TestSessionExpiry(t *testing.T) {
	h := setup(t)
	token, _ := h.add("ann", operator.RoleViewer, nil)
	short, err := h.store.SignIn(h.ctx, token, 50*time.Millisecond)
	require.NoError(t, err)
	_, err = h.store.Session(h.ctx, short.ID)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	_, err = h.store.Session(h.ctx, short.ID)
	require.ErrorIs(t, err, operator.ErrUnauthorized, "expired")

	// 150 more expired sessions, and a live one.
	h.exec(`INSERT INTO reckon_operator_sessions (id_sha256, operator_id, csrf, expires_at)
	        SELECT sha256(convert_to('s' || g, 'UTF8')), id, 'x', now() - interval '1 minute' FROM reckon_operators, generate_series(1, 150) g`)
	live, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 51, h.count(`SELECT count(*) FROM reckon_operator_sessions WHERE expires_at <= now()`), "100 deleted")
	_, err = h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_operator_sessions WHERE expires_at <= now()`))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_operator_sessions`))
	_, err = h.store.Session(h.ctx, live.ID)
	require.NoError(t, err)
}

// Revoking an operator ends its sessions at once (their rows are gone) and leaves the others'.
// A session whose operator is revoked is refused even if its row were left.
func TestRevokeEndsSessions(t *testing.T) {
	h := setup(t)
	annToken, _ := h.add("ann", operator.RoleAdmin, nil)
	bobToken, _ := h.add("bob", operator.RoleOperator, nil)
	ann1, err := h.store.SignIn(h.ctx, annToken, time.Hour)
	require.NoError(t, err)
	ann2, err := h.store.SignIn(h.ctx, annToken, time.Hour)
	require.NoError(t, err)
	bob, err := h.store.SignIn(h.ctx, bobToken, time.Hour)
	require.NoError(t, err)

	_, err = h.store.Revoke(h.ctx, "ann")
	require.NoError(t, err)
	for _, sess := range []*operator.Session{ann1, ann2} {
		_, err := h.store.Session(h.ctx, sess.ID)
		require.ErrorIs(t, err, operator.ErrUnauthorized)
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operator_sessions`))
	_, err = h.store.SignIn(h.ctx, annToken, time.Hour)
	require.ErrorIs(t, err, operator.ErrUnauthorized)
	_, err = h.store.Session(h.ctx, bob.ID)
	require.NoError(t, err)

	// Revoked behind the store's back (its row kept): the lookup still refuses the session.
	h.exec(`UPDATE reckon_operators SET revoked_at = now() WHERE name = 'bob'`)
	_, err = h.store.Session(h.ctx, bob.ID)
	require.ErrorIs(t, err, operator.ErrUnauthorized)
}

// Session refuses a malformed id without error detail, like an unknown one.
func TestSessionMalformed(t *testing.T) {
	h := setup(t)
	token, _ := h.add("ann", operator.RoleViewer, nil)
	sess, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	for name, id := range map[string]string{
		"empty":        "",
		"unknown":      strings.Repeat("A", 43),
		"token":        token,
		"truncated":    sess.ID[:42],
		"NUL":          sess.ID[:10] + "\x00" + sess.ID[11:],
		"invalid UTF8": sess.ID[:10] + "\xff" + sess.ID[11:],
		"oversize":     sess.ID + strings.Repeat("A", 1<<20),
		"csrf":         sess.CSRF,
	} {
		got, err := h.store.Session(h.ctx, id)
		require.ErrorIs(t, err, operator.ErrUnauthorized, name)
		require.Nil(t, got, name)
	}
}

// ValidCSRF accepts the session's own token only.
func TestValidCSRF(t *testing.T) {
	h := setup(t)
	token, _ := h.add("ann", operator.RoleOperator, nil)
	sess, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)
	other, err := h.store.SignIn(h.ctx, token, time.Hour)
	require.NoError(t, err)

	require.True(t, operator.ValidCSRF(sess, sess.CSRF))
	require.False(t, operator.ValidCSRF(sess, other.CSRF))
	require.False(t, operator.ValidCSRF(sess, ""))
	require.False(t, operator.ValidCSRF(sess, sess.CSRF[:len(sess.CSRF)-1]))
	require.False(t, operator.ValidCSRF(sess, sess.CSRF+"A"))
	require.False(t, operator.ValidCSRF(sess, sess.ID))
	require.False(t, operator.ValidCSRF(nil, sess.CSRF))
	require.False(t, operator.ValidCSRF(&operator.Session{}, ""))
}
