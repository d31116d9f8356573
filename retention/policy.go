package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/ident"
)

// ErrInvalid is wrapped by the errors of input that SetPolicy, DeletePolicy and SetAuditSettings
// refuse; the message names what is wrong.
var ErrInvalid = errors.New("retention: invalid input")

// Policy is a tenant's own effect retention, over Config.EffectRetention.
type Policy struct {
	TenantID        string        `json:"tenant_id"`
	EffectRetention time.Duration `json:"effect_retention_ns"`
	UpdatedAt       time.Time     `json:"updated_at"`
}

// CheckTenant refuses (ErrInvalid) a tenant id outside the rule of reckon_tenants.id
// (ident.TenantIDRule).
func CheckTenant(tenantID string) error {
	if !ident.IsTenantID(tenantID) {
		return fmt.Errorf("%w: tenant %q: want %s", ErrInvalid, tenantID, ident.TenantIDRule)
	}
	return nil
}

// SetPolicy sets how long the settled work of tenantID is kept (at least MinEffectRetention, in
// whole seconds), over the global retention; it applies from the next run. A partition of the
// audit history is never dropped while an effect it tells of exists, so a policy longer than the
// audit retention keeps the history of the tenant's effects as long as the effects.
func SetPolicy(ctx context.Context, pool *pgxpool.Pool, tenantID string, effectRetention time.Duration) (*Policy, error) {
	if err := CheckTenant(tenantID); err != nil {
		return nil, err
	}
	if effectRetention < MinEffectRetention || effectRetention%time.Second != 0 {
		return nil, fmt.Errorf("%w: effect retention %v: want at least %v, in whole seconds", ErrInvalid, effectRetention, MinEffectRetention)
	}
	row, err := dbsqlc.New(pool).RetentionPolicySet(ctx, dbsqlc.RetentionPolicySetParams{
		TenantID: tenantID, EffectRetentionSeconds: int64(effectRetention / time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("retention: set the policy of %s: %w", tenantID, err)
	}
	return policyFromRow(row), nil
}

// DeletePolicy removes tenantID's policy: its settled work follows the global retention again. It
// reports whether there was one.
func DeletePolicy(ctx context.Context, pool *pgxpool.Pool, tenantID string) (bool, error) {
	if err := CheckTenant(tenantID); err != nil {
		return false, err
	}
	n, err := dbsqlc.New(pool).RetentionPolicyDelete(ctx, tenantID)
	if err != nil {
		return false, fmt.Errorf("retention: delete the policy of %s: %w", tenantID, err)
	}
	return n > 0, nil
}

// ListPolicies returns the tenants' policies, by tenant.
func ListPolicies(ctx context.Context, pool *pgxpool.Pool) ([]Policy, error) {
	rows, err := dbsqlc.New(pool).RetentionPolicyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention: list the policies: %w", err)
	}
	policies := make([]Policy, len(rows))
	for i, row := range rows {
		policies[i] = *policyFromRow(row)
	}
	return policies, nil
}

func policyFromRow(row dbsqlc.ReckonRetentionPolicy) *Policy {
	return &Policy{TenantID: row.TenantID, EffectRetention: time.Duration(row.EffectRetentionSeconds) * time.Second, UpdatedAt: row.UpdatedAt}
}

// AuditSettings say how the audit histories are cut into partitions (reckon_audit_settings).
type AuditSettings struct {
	// Period is "month" (the default) or "day": the range of one partition.
	Period string `json:"period"`
	// Premake is how far ahead of now partitions are made (default 62 days; 1 to 400 days).
	Premake time.Duration `json:"premake_ns"`
}

// GetAuditSettings reads reckon_audit_settings.
func GetAuditSettings(ctx context.Context, pool *pgxpool.Pool) (*AuditSettings, error) {
	row, err := dbsqlc.New(pool).RetentionAuditSettingsGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention: read the audit settings: %w", err)
	}
	return &AuditSettings{Period: row.Period, Premake: time.Duration(row.PremakeSeconds) * time.Second}, nil
}

// SetAuditSettings changes the period (when not empty) and the premake (when not 0) of the
// histories' partitions and returns the settings as they now are. The partitions that exist keep
// their ranges: a change affects those made afterwards.
func SetAuditSettings(ctx context.Context, pool *pgxpool.Pool, period string, premake time.Duration) (*AuditSettings, error) {
	params := dbsqlc.RetentionAuditSettingsSetParams{}
	switch period {
	case "":
	case "day", "month":
		params.Period = &period
	default:
		return nil, fmt.Errorf("%w: period %q: want day or month", ErrInvalid, period)
	}
	if premake != 0 {
		if premake < 24*time.Hour || premake > 400*24*time.Hour || premake%time.Second != 0 {
			return nil, fmt.Errorf("%w: premake %v: want 24h to 9600h (400 days), in whole seconds", ErrInvalid, premake)
		}
		seconds := int64(premake / time.Second)
		params.PremakeSeconds = &seconds
	}
	row, err := dbsqlc.New(pool).RetentionAuditSettingsSet(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("retention: change the audit settings: %w", err)
	}
	return &AuditSettings{Period: row.Period, Premake: time.Duration(row.PremakeSeconds) * time.Second}, nil
}
