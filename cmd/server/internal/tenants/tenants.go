// Package tenants stores the tenants of the server's HTTP API and their bearer tokens
// (reckon_tenants, reckon_api_tokens): a tenant's tokens see and change its effects, runs, sagas
// and sessions; a system token belongs to the deployment. A token is stored only as its SHA-256:
// CreateToken and CreateSystemToken return it once. The HTTP API authenticates its callers with
// Authenticate; the server's CLI (`server tenants`, `server tokens`) manages both.
package tenants

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/secret"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/postgres"
)

// TokenPrefix starts every API token.
const TokenPrefix = "rk_"

// Sentinel errors of the package. Test with errors.Is. Their text is what the server's CLI prints
// (it has said "api:" since these functions were the HTTP package's).
var (
	// ErrExists: Create with an id that is taken.
	ErrExists = errors.New("api: tenant already exists")
	// ErrNotFound: no tenant with that id.
	ErrNotFound = errors.New("api: tenant not found")
	// ErrTokenNotFound: no token with that id.
	ErrTokenNotFound = errors.New("api: token not found")
	// ErrInvalidToken: Authenticate was given a token that is unknown or revoked, or a tenant's
	// token whose tenant is disabled.
	ErrInvalidToken = errors.New("api: invalid or revoked token")
	// ErrNoBearer: AuthenticateRequest was given a request without an Authorization header.
	ErrNoBearer = errors.New("api: missing Authorization: Bearer <token>")
	// ErrMalformedBearer: AuthenticateRequest was given an Authorization header that is not
	// "Bearer <token>".
	ErrMalformedBearer = errors.New("api: Authorization header: want Bearer <token>")
)

// Tenant is a row of reckon_tenants.
type Tenant struct {
	ID         string
	Name       string
	CreatedAt  time.Time
	DisabledAt *time.Time
}

// Token is a row of reckon_api_tokens: everything about a token but the token itself. A token is
// either a tenant's (TenantID set) or a system token (System, no tenant).
type Token struct {
	ID uuid.UUID
	// TenantID is the tenant whose effects, runs, sagas and sessions the token sees and changes;
	// empty for a system token.
	TenantID string
	Name     string
	// Prefix is the token's first characters, to tell tokens apart.
	Prefix string
	// Admin tokens may also manage their own tenant's turn handler.
	Admin bool
	// System tokens belong to the deployment: they alone change what every tenant shares (HTTP
	// connectors, saga definitions) and may manage any tenant's turn handler; the tenant-scoped
	// routes refuse them.
	System    bool
	CreatedAt time.Time
	RevokedAt *time.Time
}

func tenantFromRow(row dbsqlc.ReckonTenant) *Tenant {
	return &Tenant{ID: row.ID, Name: row.Name, CreatedAt: row.CreatedAt, DisabledAt: row.DisabledAt}
}

func tokenFromRow(row dbsqlc.ReckonApiToken) *Token {
	token := &Token{ID: row.ID, Name: row.Name, Prefix: row.Prefix, Admin: row.Admin, System: row.System, CreatedAt: row.CreatedAt, RevokedAt: row.RevokedAt}
	if row.TenantID != nil {
		token.TenantID = *row.TenantID
	}
	return token
}

// Create creates a tenant. Errors: a malformed id, ErrExists.
func Create(ctx context.Context, db dbsqlc.DBTX, id, name string) (*Tenant, error) {
	if err := ident.ValidateTenantID(id); err != nil {
		return nil, err
	}
	row, err := dbsqlc.New(db).TenantInsert(ctx, dbsqlc.TenantInsertParams{ID: id, Name: name})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrExists, id)
	}
	if err != nil {
		return nil, fmt.Errorf("api: create tenant %s: %w", id, err)
	}
	return tenantFromRow(row), nil
}

// List returns every tenant, by id.
func List(ctx context.Context, db dbsqlc.DBTX) ([]*Tenant, error) {
	rows, err := dbsqlc.New(db).TenantList(ctx)
	if err != nil {
		return nil, fmt.Errorf("api: list tenants: %w", err)
	}
	tenants := make([]*Tenant, len(rows))
	for i, row := range rows {
		tenants[i] = tenantFromRow(row)
	}
	return tenants, nil
}

// SetDisabled disables a tenant (its tokens are refused from then on; its effects are
// untouched) or enables it again. Errors: ErrNotFound.
func SetDisabled(ctx context.Context, db dbsqlc.DBTX, id string, disabled bool) (*Tenant, error) {
	row, err := dbsqlc.New(db).TenantSetDisabled(ctx, dbsqlc.TenantSetDisabledParams{ID: id, Disabled: disabled})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("api: disable tenant %s: %w", id, err)
	}
	return tenantFromRow(row), nil
}

// TokenOpts adjusts CreateToken. Nil means the defaults.
type TokenOpts struct {
	// Name says what the token is for; the audit trail of its actions names it. Default: none
	// (the token's prefix is used).
	Name string
	// Admin lets the token manage its tenant's turn handler. Default false.
	Admin bool
}

// CreateToken creates a bearer token for the tenant and returns it with its record. The token is
// returned only here: the database keeps its SHA-256. Errors: ErrNotFound.
func CreateToken(ctx context.Context, db dbsqlc.DBTX, tenantID string, opts *TokenOpts) (string, *Token, error) {
	if opts == nil {
		opts = &TokenOpts{}
	}
	q := dbsqlc.New(db)
	if _, err := q.TenantGet(ctx, tenantID); postgres.NoRows(err) {
		return "", nil, fmt.Errorf("%w: %s (create it first)", ErrNotFound, tenantID)
	} else if err != nil {
		return "", nil, fmt.Errorf("api: read tenant %s: %w", tenantID, err)
	}
	secret, token, err := insertToken(ctx, q, dbsqlc.APITokenInsertParams{TenantID: &tenantID, Name: opts.Name, Admin: opts.Admin})
	if err != nil {
		return "", nil, fmt.Errorf("api: create token for %s: %w", tenantID, err)
	}
	return secret, token, nil
}

// CreateSystemToken creates a system token, named name (written to the audit trail of its
// changes; empty: its prefix is used), and returns it with its record. The token is returned only
// here: the database keeps its SHA-256.
func CreateSystemToken(ctx context.Context, db dbsqlc.DBTX, name string) (string, *Token, error) {
	secret, token, err := insertToken(ctx, dbsqlc.New(db), dbsqlc.APITokenInsertParams{Name: name, System: true})
	if err != nil {
		return "", nil, fmt.Errorf("api: create system token: %w", err)
	}
	return secret, token, nil
}

// insertToken makes a new secret and stores the token of params (all but its id, prefix and hash).
func insertToken(ctx context.Context, q *dbsqlc.Queries, params dbsqlc.APITokenInsertParams) (string, *Token, error) {
	made, err := secret.New(TokenPrefix)
	if err != nil {
		return "", nil, err
	}
	params.ID, params.Prefix, params.TokenSha256 = uuid.Must(uuid.NewV7()), made.Prefix, made.SHA256
	row, err := q.APITokenInsert(ctx, params)
	if err != nil {
		return "", nil, err
	}
	return made.Value, tokenFromRow(row), nil
}

// ListTokens returns the tenant's tokens (revoked ones included), oldest first.
func ListTokens(ctx context.Context, db dbsqlc.DBTX, tenantID string) ([]*Token, error) {
	rows, err := dbsqlc.New(db).APITokenListByTenant(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("api: list tokens of %s: %w", tenantID, err)
	}
	return tokensFromRows(rows), nil
}

// ListSystemTokens returns the system tokens (revoked ones included), oldest first.
func ListSystemTokens(ctx context.Context, db dbsqlc.DBTX) ([]*Token, error) {
	rows, err := dbsqlc.New(db).APITokenListSystem(ctx)
	if err != nil {
		return nil, fmt.Errorf("api: list system tokens: %w", err)
	}
	return tokensFromRows(rows), nil
}

func tokensFromRows(rows []dbsqlc.ReckonApiToken) []*Token {
	tokens := make([]*Token, len(rows))
	for i, row := range rows {
		tokens[i] = tokenFromRow(row)
	}
	return tokens
}

// RevokeToken revokes a token for good. Revoking it again changes nothing. Errors:
// ErrTokenNotFound.
func RevokeToken(ctx context.Context, db dbsqlc.DBTX, id uuid.UUID) (*Token, error) {
	row, err := dbsqlc.New(db).APITokenRevoke(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrTokenNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("api: revoke token %s: %w", id, err)
	}
	return tokenFromRow(row), nil
}

// Authenticate returns the live token whose secret this is. Errors: ErrInvalidToken for an unknown
// or revoked token, or a tenant token of a disabled tenant.
func Authenticate(ctx context.Context, db dbsqlc.DBTX, value string) (*Token, error) {
	if !strings.HasPrefix(value, TokenPrefix) || len(value) > 200 {
		return nil, ErrInvalidToken
	}
	row, err := dbsqlc.New(db).APITokenAuthenticate(ctx, secret.Hash(value))
	if postgres.NoRows(err) {
		return nil, ErrInvalidToken
	}
	if err != nil {
		return nil, fmt.Errorf("api: authenticate: %w", err)
	}
	return tokenFromRow(row), nil
}

// AuthenticateRequest authenticates the bearer token of r's "Authorization: Bearer <token>"
// header (the scheme in any case) with Authenticate. Errors: ErrNoBearer, ErrMalformedBearer,
// ErrInvalidToken. The HTTP API and the MCP gateway authenticate their callers with it.
func AuthenticateRequest(ctx context.Context, db dbsqlc.DBTX, r *http.Request) (*Token, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		return nil, ErrNoBearer
	}
	scheme, secret, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return nil, ErrMalformedBearer
	}
	return Authenticate(ctx, db, strings.TrimSpace(secret))
}
