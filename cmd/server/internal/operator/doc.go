// Package operator holds the operator accounts of the console and the operator CLI: who may sign
// in, with which role (viewer, operator, admin) over which tenants, and the console's sessions.
//
// # Operators
//
// An operator is added with a name, a role and a scope (every tenant, or a list of tenant ids) and
// gets a bearer token, "rko_" followed by 43 random characters, returned once by Store.Add: the
// database keeps only its SHA-256 (reckon_operators). Operators are revoked, never deleted, so that
// an audit trail naming one keeps meaning someone; a name is unique among the operators not revoked.
//
// # Sessions
//
// The console signs an operator in with its token (Store.SignIn) and gets a Session: a random id
// for the cookie, of which only the SHA-256 is stored (reckon_operator_sessions), a CSRF token its
// forms carry (ValidCSRF compares it in constant time), and an expiry. A session ends when it
// expires, at Store.SignOut, or when its operator is revoked. Expired sessions are deleted a few at
// a time at every sign-in, and all of them by the reactors' retention runs (package retention).
//
// # Input
//
// Names, roles, tenant ids, tokens and session ids are checked before they reach Postgres: a bad
// name, role or tenant is ErrInvalid naming the field, and a malformed token or session id (wrong
// length, NUL bytes, invalid UTF-8) is ErrUnauthorized, like an unknown one.
package operator
