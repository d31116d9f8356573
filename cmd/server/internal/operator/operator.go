package operator

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/ident"
)

// Errors of the package. Wrapped errors add what was refused; test with errors.Is.
var (
	// ErrUnauthorized: an unknown, revoked or malformed token, or an unknown, expired or malformed
	// session id, or the session of a revoked operator. Which one is not said, on purpose.
	ErrUnauthorized = errors.New("operator: unauthorized")
	// ErrNotFound: no operator, not revoked, has the name.
	ErrNotFound = errors.New("operator: not found")
	// ErrExists: an operator that is not revoked already has the name.
	ErrExists = errors.New("operator: an operator with this name exists")
	// ErrInvalid: a name, role, tenant or duration that cannot be used; the error names the field.
	// Nothing was changed.
	ErrInvalid = errors.New("operator: invalid input")
)

// Role is what an operator may do. Each role may do what the one before it does.
type Role string

// The roles.
const (
	// RoleViewer reads everything in its scope.
	RoleViewer Role = "viewer"
	// RoleOperator also resolves, cancels and runs bulk actions.
	RoleOperator Role = "operator"
	// RoleAdmin also manages operators on the console's operators page (list, revoke).
	RoleAdmin Role = "admin"
)

// ParseRole returns the role named s: viewer, operator or admin. Anything else is ErrInvalid.
func ParseRole(s string) (Role, error) {
	switch role := Role(s); role {
	case RoleViewer, RoleOperator, RoleAdmin:
		return role, nil
	}
	if len(s) > 64 {
		return "", fmt.Errorf("%w: role: %d bytes; want viewer, operator or admin", ErrInvalid, len(s))
	}
	return "", fmt.Errorf("%w: role %q: want viewer, operator or admin", ErrInvalid, s)
}

// Operator is an operator account: everything about it but its token.
type Operator struct {
	ID uuid.UUID `json:"id"`
	// Name is unique among the operators not revoked: 1 to 64 letters, digits, '.', '_', '@' or
	// '-'. The console writes it to the audit trail as "console:{name}".
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Tenants are the tenants the operator sees and acts on, sorted; nil: every tenant. They are
	// valid tenant ids, but need not exist.
	Tenants []string `json:"tenants"`
	// Prefix is the token's first characters, to tell tokens apart.
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// CanAct reports whether the operator may change things (resolve, cancel, bulk actions): an
// operator or an admin.
func (o *Operator) CanAct() bool { return o.Role == RoleOperator || o.Role == RoleAdmin }

// IsAdmin reports whether the operator may manage operators.
func (o *Operator) IsAdmin() bool { return o.Role == RoleAdmin }

// Sees reports whether tenant is in the operator's scope.
func (o *Operator) Sees(tenant string) bool {
	return o.Tenants == nil || slices.Contains(o.Tenants, tenant)
}

func operatorFromRow(row dbsqlc.ReckonOperator) *Operator {
	return &Operator{
		ID: row.ID, Name: row.Name, Role: Role(row.Role), Tenants: row.Tenants, Prefix: row.Prefix,
		CreatedAt: row.CreatedAt, RevokedAt: row.RevokedAt,
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// CheckName refuses (ErrInvalid) a name that is not 1 to 64 letters, digits, '.', '_', '@' or '-'.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty", ErrInvalid)
	case len(name) > 64:
		return fmt.Errorf("%w: name: %d bytes; want at most 64", ErrInvalid, len(name))
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: name %q: want 1 to 64 letters, digits, '.', '_', '@' or '-'", ErrInvalid, name)
	}
	return nil
}

// maxTenants bounds an operator's list of tenants.
const maxTenants = 1000

// CheckTenants refuses (ErrInvalid) a scope that is an empty list (nil, not an empty list, means
// every tenant), longer than 1000 tenants, or holds something that is not a tenant id
// (ident.ValidateTenantID).
func CheckTenants(tenants []string) error {
	switch {
	case tenants == nil:
		return nil
	case len(tenants) == 0:
		return fmt.Errorf("%w: tenants: an empty list; give none (nil) for every tenant", ErrInvalid)
	case len(tenants) > maxTenants:
		return fmt.Errorf("%w: tenants: %d; want at most %d", ErrInvalid, len(tenants), maxTenants)
	}
	for _, tenant := range tenants {
		if len(tenant) > 64 {
			return fmt.Errorf("%w: tenants: a tenant id of %d bytes; want at most 63", ErrInvalid, len(tenant))
		}
		if err := ident.ValidateTenantID(tenant); err != nil {
			return fmt.Errorf("%w: tenants: %v", ErrInvalid, err)
		}
	}
	return nil
}
