package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// outcomeWindow is how far back ConnectorSummary.Outcomes counts.
const outcomeWindow = time.Hour

// ConnectorSummary is a connector: how it is set up and how its calls have gone lately.
type ConnectorSummary struct {
	Name string
	// Policy, Tags, Timeout and MaxAttempts are the connector's as registered (or, for a stored
	// HTTP connector not loaded yet, as its definition makes them); empty for a connector known
	// only from the outcomes of its effects (a Go connector of the reactors).
	Policy      effects.Policy
	Tags        []effects.Tag
	Timeout     time.Duration
	MaxAttempts int
	// Definition is the stored HTTP connector definition (JSON of docs/connectors.md), if it is
	// one; nil otherwise.
	Definition json.RawMessage
	// Outcomes counts the transitions of its effects into CONFIRMED, FAILED, UNKNOWN and STUCK in
	// the last hour, within scope; every one of the four states is present.
	Outcomes map[effects.State]int64
	// Limit is the connector's own limit (effects.Connector.Limit, or an HTTP connector's
	// definition's), defaults filled in; nil when the server does not know it (a Go connector of
	// the reactors).
	Limit *effects.Limit
	// Override is the operator's limit, which replaces Limit in every reactor; nil when none.
	Override *effects.LimitSetting
	// LimitStates is the state of its limit keys that were ever used: the shared key (TenantID "")
	// and, for a limit per tenant, the keys of the tenants in scope.
	LimitStates []effects.LimitState
	// Pauses are the operators' pauses of it in scope (effects.Client.PauseConnector): of every
	// tenant (TenantID "") and of the tenants in scope.
	Pauses []effects.ConnectorPause
}

// Throttled reports whether one of its limit keys is paused or has its circuit open or half open:
// no call (but a probe) goes out for it.
func (s ConnectorSummary) Throttled() bool {
	return slices.ContainsFunc(s.LimitStates, func(st effects.LimitState) bool {
		return st.PausedUntil != nil || st.Circuit != "closed"
	})
}

// Connectors lists, by name, the connectors registered in the effects client, the HTTP connectors
// stored in the database, the connectors whose effects in scope changed state in the last hour,
// and those with an operator's limit, a limit key or an operator's pause in scope, each with its
// limits and pauses.
func (o *Ops) Connectors(ctx context.Context, scope Scope) ([]ConnectorSummary, error) {
	byName := map[string]*ConnectorSummary{}
	summary := func(name string) *ConnectorSummary {
		s, ok := byName[name]
		if !ok {
			s = &ConnectorSummary{Name: name, Outcomes: map[effects.State]int64{
				effects.StateConfirmed: 0, effects.StateFailed: 0, effects.StateUnknown: 0, effects.StateStuck: 0,
			}}
			byName[name] = s
		}
		return s
	}
	describe := func(s *ConnectorSummary, c *effects.Connector) {
		s.Policy, s.Tags, s.Timeout, s.MaxAttempts = effects.PolicyOf(c), slices.Clone(c.Tags), c.Timeout, c.MaxAttempts
		limit, err := c.Limit.WithDefaults()
		if err != nil { // not registrable: shown as it is
			limit = c.Limit
		}
		s.Limit = &limit
	}
	registry := o.effects.Registry()
	for _, name := range registry.Names() {
		if c, ok := registry.Get(name); ok {
			describe(summary(name), c)
		}
	}
	defs, err := httpconn.List(ctx, o.pool)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	for _, def := range defs {
		s := summary(def.Name)
		if s.Definition, err = json.Marshal(def); err != nil {
			return nil, fmt.Errorf("ops: connector %s: %w", def.Name, err)
		}
		if s.Policy == "" {
			c := def.WithDefaults().Connector(nil)
			describe(s, &c)
		}
	}
	var outcomes []dbsqlc.OpsConnectorOutcomesRow
	err = o.read(ctx, func(q *dbsqlc.Queries) error {
		tenants, err := scope.tenantIDs(ctx, "", q.OpsTransitionTenants)
		if err != nil || len(tenants) == 0 {
			return err
		}
		outcomes, err = q.OpsConnectorOutcomes(ctx, dbsqlc.OpsConnectorOutcomesParams{TenantIds: tenants, Since: o.now().Add(-outcomeWindow)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ops: connector outcomes: %w", err)
	}
	for _, row := range outcomes {
		summary(row.Connector).Outcomes[effects.State(row.ToState)] = row.Count
	}
	if err := o.addLimits(ctx, scope, summary); err != nil {
		return nil, err
	}
	if err := o.addPauses(ctx, scope, summary); err != nil {
		return nil, err
	}
	out := make([]ConnectorSummary, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b ConnectorSummary) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
