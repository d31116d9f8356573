package effects

import (
	"context"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// ConnectorPause is an operator's pause of a connector: no new call of it starts — for every
// tenant's effects (TenantID ""), or for one tenant's — until an operator resumes it. Its effects
// wait PENDING as effects held back by a limit do (their jobs snoozed, no attempt spent); calls
// already in flight finish. Unlike an upstream's Retry-After it never expires, and ResetLimit does
// not end it. See docs/design.md, "Limits".
type ConnectorPause struct {
	Connector string `json:"connector"`
	// TenantID is the tenant whose effects wait; "" for every tenant's.
	TenantID string    `json:"tenant_id"`
	PausedBy string    `json:"paused_by"`
	Reason   string    `json:"reason"`
	PausedAt time.Time `json:"paused_at"`
}

// pauseReason is the reason a limit key's acquire gives for an operator's pause (migration 0036),
// the reason label of reckon_connector_limit_waits_total.
const pauseReason = "operator"

// checkPause refuses a connector name, tenant, actor or reason Postgres cannot store, or a name
// out of bounds, naming the field (ErrInvalidLimit).
func checkPause(connector, tenantID, actor, reason string) error {
	if err := checkLimitSetting(connector, actor, reason); err != nil {
		return err
	}
	if err := jsonx.CheckTexts("tenant_id", tenantID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	return nil
}

// PauseConnector pauses connector, for tenantID's effects or ("") every tenant's, by actor for
// reason: from its commit no reactor starts a call of it (a reactor that has not yet heard of it
// asks the database, which refuses), Do enqueues instead of calling, and the effects wait PENDING
// without spending attempts until ResumeConnector. A call that began before goes on and settles.
// A key already paused keeps its pause as it was (created false). Each pause is logged in
// reckon_connector_pause_log. Errors: ErrInvalidLimit for a bad name or text.
func (c *Client) PauseConnector(ctx context.Context, connector, tenantID, actor, reason string) (pause *ConnectorPause, created bool, err error) {
	if err := checkPause(connector, tenantID, actor, reason); err != nil {
		return nil, false, err
	}
	row, err := c.queries.ConnectorPause(ctx, dbsqlc.ConnectorPauseParams{Connector: connector, TenantID: tenantID, Actor: actor, Reason: reason})
	if err != nil {
		return nil, false, fmt.Errorf("effects: pause %q: %w", connector, err)
	}
	c.limits.invalidate() // this process's next call sees it at once
	return &ConnectorPause{Connector: connector, TenantID: tenantID, PausedBy: row.PausedBy, Reason: row.Reason, PausedAt: row.PausedAt}, row.Created, nil
}

// ResumeConnector ends the pause of connector for tenantID ("" : the pause of every tenant — a
// tenant's own pause stays), by actor for reason, logged: the effects it held are fetched again at
// once (their snoozed jobs made due now). It reports whether there was such a pause. Errors:
// ErrInvalidLimit for a bad name or text.
func (c *Client) ResumeConnector(ctx context.Context, connector, tenantID, actor, reason string) (bool, error) {
	if err := checkPause(connector, tenantID, actor, reason); err != nil {
		return false, err
	}
	resumed, err := c.queries.ConnectorResume(ctx, dbsqlc.ConnectorResumeParams{Connector: connector, TenantID: tenantID, Actor: actor, Reason: reason})
	if err != nil {
		return false, fmt.Errorf("effects: resume %q: %w", connector, err)
	}
	c.limits.invalidate()
	return resumed, nil
}

// ConnectorPauses returns every operator's pause, by connector and tenant.
func (c *Client) ConnectorPauses(ctx context.Context) ([]ConnectorPause, error) {
	rows, err := c.queries.ConnectorPauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("effects: read the connectors' pauses: %w", err)
	}
	out := make([]ConnectorPause, len(rows))
	for i, r := range rows {
		out[i] = ConnectorPause{Connector: r.Connector, TenantID: r.TenantID, PausedBy: r.PausedBy, Reason: r.Reason, PausedAt: r.PausedAt}
	}
	return out, nil
}

// operatorPaused reports whether the process's view of the limits holds connector paused for
// tenantID's effects (a pause of every tenant or of its own). A status check asks this, not the
// database: one that starts as a pause lands is a call in flight.
func (l *limiter) operatorPaused(ctx context.Context, connector, tenantID string) bool {
	v, _ := l.current(ctx)
	for _, p := range v.pauses[connector] {
		if p.TenantID == "" || p.TenantID == tenantID {
			return true
		}
	}
	return false
}
