// Package ident holds the rules for the identifiers Reckon stores and refers to by name: tenant
// ids, and the names of HTTP connectors and saga definitions. Each rule has one home here, so that
// every package that checks one checks the same thing.
package ident

import (
	"fmt"
	"regexp"
)

// TenantIDRule says, for messages, what a tenant id may be. It is the CHECK constraint of
// reckon_tenants.id (migration 0006_api).
const TenantIDRule = "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"

var tenantIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// IsTenantID reports whether id follows TenantIDRule.
func IsTenantID(id string) bool { return tenantIDRE.MatchString(id) }

// ValidateTenantID is IsTenantID as an error that names id and TenantIDRule, nil when id follows
// the rule.
func ValidateTenantID(id string) error {
	if !IsTenantID(id) {
		return fmt.Errorf("tenant id %q: want %s", id, TenantIDRule)
	}
	return nil
}

// NameRule says, for messages, what the name of an HTTP connector or a saga definition may be
// (each also has a length limit of its own).
const NameRule = "letters, digits, '.', '_', '-' and ':', starting with a letter or digit"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// IsName reports whether name follows NameRule.
func IsName(name string) bool { return nameRE.MatchString(name) }
