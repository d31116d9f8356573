package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Operators' pauses of connectors (effects.Client.PauseConnector): no new call of the connector
// starts — for every tenant's effects, or for one tenant's — until an operator resumes it. The
// HTTP API, the console and the CLI (`server connectors pause|resume`) all go through these.

// ErrSharedPause is what pausing or resuming a connector in a scope of some tenants returns: a
// connector's upstream is shared by every tenant, so only an operator of all tenants pauses it,
// even for one tenant.
var ErrSharedPause = errors.New("a connector's upstream is shared by every tenant: only an operator of all tenants may pause or resume it")

// CheckPause checks a pause or resume before anything is stored: the connector name
// (CheckLimitName: "name"), the tenant ("" for every tenant, else a tenant id: "tenant_id") and
// the reason (required, text of at most 2000 bytes: "reason"). The error is a *FieldError named as
// the HTTP API names the field.
func CheckPause(connector, tenant, reason string) error {
	if err := CheckLimitName(connector); err != nil {
		return err
	}
	if tenant != "" {
		if err := ident.ValidateTenantID(tenant); err != nil {
			return &FieldError{Field: "tenant_id", Message: jsonx.SafeText(err.Error())}
		}
	}
	if strings.TrimSpace(reason) == "" {
		return &FieldError{Field: "reason", Message: "required: it is recorded with the pause"}
	}
	if len(reason) > maxLimitReasonLen {
		return &FieldError{Field: "reason", Message: fmt.Sprintf("limited to %d bytes", maxLimitReasonLen)}
	}
	if err := checkText(reason); err != nil {
		return &FieldError{Field: "reason", Message: err.Error()}
	}
	return nil
}

// ConnectorPauses returns the operators' pauses in scope, by connector and tenant: the pauses of
// every tenant, and those of the tenants in scope. The list is never nil.
func (o *Ops) ConnectorPauses(ctx context.Context, scope Scope) ([]effects.ConnectorPause, error) {
	pauses, err := o.effects.ConnectorPauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	seen := []effects.ConnectorPause{}
	for _, p := range pauses {
		if p.TenantID == "" || scope.Sees(p.TenantID) {
			seen = append(seen, p)
		}
	}
	return seen, nil
}

// PauseConnector pauses connector name (one Connectors lists) for tenant's effects ("" : every
// tenant's), recording actor as given and reason: every reactor stops starting its calls at once
// (calls in flight finish), and its effects wait PENDING until ResumeConnector. A key already
// paused keeps its pause (created false). Errors: ErrSharedPause for a scope of some tenants, a
// *FieldError for bad input (CheckPause, CheckAction's actor), ErrNotFound for a connector not
// listed; nothing changes then.
func (o *Ops) PauseConnector(ctx context.Context, scope Scope, name, tenant, actor, reason string) (*effects.ConnectorPause, bool, error) {
	if err := o.checkPauseTarget(ctx, scope, name, tenant, actor, reason); err != nil {
		return nil, false, err
	}
	pause, created, err := o.effects.PauseConnector(ctx, name, tenant, actor, reason)
	return pause, created, wireLimitError(err)
}

// ResumeConnector ends the pause of connector name for tenant ("" : the pause of every tenant; a
// tenant's own pause stays), recording actor and reason: its held effects go out at once. It
// reports whether there was such a pause. Errors as PauseConnector's.
func (o *Ops) ResumeConnector(ctx context.Context, scope Scope, name, tenant, actor, reason string) (bool, error) {
	if err := o.checkPauseTarget(ctx, scope, name, tenant, actor, reason); err != nil {
		return false, err
	}
	resumed, err := o.effects.ResumeConnector(ctx, name, tenant, actor, reason)
	return resumed, wireLimitError(err)
}

func (o *Ops) checkPauseTarget(ctx context.Context, scope Scope, name, tenant, actor, reason string) error {
	if scope.Tenants != nil {
		return ErrSharedPause
	}
	if err := CheckPause(name, tenant, reason); err != nil {
		return err
	}
	if err := CheckAction(actor, reason); err != nil {
		return err
	}
	_, err := o.Connector(ctx, scope, name)
	return err
}

// addPauses adds to the summaries the operators' pauses in scope.
func (o *Ops) addPauses(ctx context.Context, scope Scope, summary func(string) *ConnectorSummary) error {
	pauses, err := o.ConnectorPauses(ctx, scope)
	if err != nil {
		return err
	}
	for _, p := range pauses {
		s := summary(p.Connector)
		s.Pauses = append(s.Pauses, p)
	}
	return nil
}
