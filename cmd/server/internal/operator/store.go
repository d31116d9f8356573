package operator

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/secret"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// TokenPrefix starts every operator token.
const TokenPrefix = "rko_"

// Store keeps the operators and their sessions in Postgres. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns the operators and sessions of pool's database.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// Add adds an operator named name with role over tenants (nil: every tenant; they are stored
// sorted, once each) and returns its token with its record. The token is returned only here: the
// database keeps its SHA-256. Errors: ErrInvalid naming the field (nothing stored), ErrExists.
func (s *Store) Add(ctx context.Context, name string, role Role, tenants []string) (string, *Operator, error) {
	if err := CheckName(name); err != nil {
		return "", nil, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return "", nil, err
	}
	if err := CheckTenants(tenants); err != nil {
		return "", nil, err
	}
	if tenants != nil {
		tenants = slices.Compact(slices.Sorted(slices.Values(tenants)))
	}
	token, err := secret.New(TokenPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("operator: add %s: %w", name, err)
	}
	row, err := dbsqlc.New(s.pool).OperatorInsert(ctx, dbsqlc.OperatorInsertParams{
		ID: uuid.Must(uuid.NewV7()), Name: name, Role: string(role), Tenants: tenants,
		Prefix: token.Prefix, TokenSha256: token.SHA256,
	})
	if postgres.NoRows(err) {
		return "", nil, fmt.Errorf("%w: %s (revoke it first to give the name to someone else)", ErrExists, name)
	}
	if err != nil {
		return "", nil, fmt.Errorf("operator: add %s: %w", name, err)
	}
	return token.Value, operatorFromRow(row), nil
}

// List returns every operator, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]*Operator, error) {
	rows, err := dbsqlc.New(s.pool).OperatorList(ctx)
	if err != nil {
		return nil, fmt.Errorf("operator: list: %w", err)
	}
	operators := make([]*Operator, len(rows))
	for i, row := range rows {
		operators[i] = operatorFromRow(row)
	}
	return operators, nil
}

// Revoke revokes the operator named name for good and ends its sessions, in one transaction: its
// token is refused from then on and its console sessions are gone. Errors: ErrInvalid for a
// malformed name, ErrNotFound when no operator that is not revoked has it.
func (s *Store) Revoke(ctx context.Context, name string) (*Operator, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var op *Operator
	err := txn.Run(ctx, s.pool, nil, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		row, err := q.OperatorRevoke(ctx, name)
		if err != nil {
			return err
		}
		if _, err := q.OperatorSessionDeleteByOperator(ctx, row.ID); err != nil {
			return err
		}
		op = operatorFromRow(row)
		return nil
	})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: no operator named %q that is not revoked", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("operator: revoke %s: %w", name, err)
	}
	return op, nil
}

// Authenticate returns the operator whose token this is. Errors: ErrUnauthorized for a malformed,
// unknown or revoked token (a malformed one is refused without asking the database).
func (s *Store) Authenticate(ctx context.Context, token string) (*Operator, error) {
	if !secret.WellFormed(token, TokenPrefix) {
		return nil, ErrUnauthorized
	}
	row, err := dbsqlc.New(s.pool).OperatorAuthenticate(ctx, secret.Hash(token))
	if postgres.NoRows(err) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, fmt.Errorf("operator: authenticate: %w", err)
	}
	return operatorFromRow(row), nil
}
