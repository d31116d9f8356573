package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/ident"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// SagaFilter selects sagas for Sagas. Every field but Scope is optional.
type SagaFilter struct {
	Scope Scope
	// Tenant is one tenant (a tenant outside Scope lists nothing), or "" for every tenant in scope.
	Tenant string
	State  saga.State
	// Name is the saga definition's name.
	Name string
	// Limit bounds the page: default 50, at most 500.
	Limit int
	// After is the cursor of the previous page (its next).
	After string
}

// ParseSagaFilter reads a filter (but its Scope) from url.Values — console query strings; the CLI
// builds them from its flags — with the names tenant, state, name, limit and after. A bad value is
// a *FieldError naming the field.
func ParseSagaFilter(v url.Values) (SagaFilter, error) {
	for name, values := range v {
		if !knownSagaParams[name] {
			return SagaFilter{}, &FieldError{Field: name, Message: "unknown filter"}
		}
		if len(values) > 1 {
			return SagaFilter{}, &FieldError{Field: name, Message: "given more than once"}
		}
	}
	f := SagaFilter{Tenant: v.Get("tenant"), State: saga.State(strings.ToUpper(v.Get("state"))), Name: v.Get("name"), After: v.Get("after")}
	limit, err := parseLimit(v.Get("limit"))
	if err != nil {
		return SagaFilter{}, err
	}
	f.Limit = limit
	return f, f.validate()
}

var knownSagaParams = map[string]bool{"tenant": true, "state": true, "name": true, "limit": true, "after": true}

func (f SagaFilter) validate() error {
	if err := checkTenant(f.Tenant); err != nil {
		return err
	}
	if f.State != "" && !dbsqlc.ReckonSagaState(f.State).Valid() {
		return &FieldError{Field: "state", Message: fmt.Sprintf("unknown saga state %q (RUNNING, COMPLETED, COMPENSATING, COMPENSATED or STUCK)", jsonx.SafeText(string(f.State)))}
	}
	if err := checkField("name", f.Name, maxNameLen); err != nil {
		return err
	}
	if _, err := checkLimit(f.Limit); err != nil {
		return err
	}
	if f.After != "" {
		if _, _, err := uuidCursor(f.After); err != nil {
			return err
		}
	}
	return nil
}

// Sagas lists the sagas f selects within its scope, newest first, with their steps, and the
// cursor of the next page ("" when this page is the last). A bad filter is a *FieldError.
func (o *Ops) Sagas(ctx context.Context, f SagaFilter) ([]*saga.Saga, string, error) {
	if err := f.validate(); err != nil {
		return nil, "", err
	}
	limit, _ := checkLimit(f.Limit)
	params := dbsqlc.OpsSagaListParams{MaxRows: int32(limit), Name: nonEmpty(f.Name)}
	if f.State != "" {
		state := dbsqlc.ReckonSagaState(f.State)
		params.State = &state
	}
	if f.After != "" {
		at, id, _ := uuidCursor(f.After)
		params.CursorCreatedAt, params.CursorID = &at, &id
	}
	var rows []dbsqlc.OpsSagaListRow
	err := o.read(ctx, func(q *dbsqlc.Queries) (err error) {
		if params.TenantIds, err = f.Scope.tenantIDs(ctx, f.Tenant, q.OpsSagaTenants); err != nil || len(params.TenantIds) == 0 {
			return err
		}
		rows, err = q.OpsSagaList(ctx, params)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("ops: list sagas: %w", err)
	}
	out := make([]*saga.Saga, 0, len(rows))
	for _, row := range rows {
		s, err := o.sagas.Get(ctx, row.ID)
		if errors.Is(err, saga.ErrNotFound) {
			continue // pruned since the listing
		}
		if err != nil {
			return nil, "", fmt.Errorf("ops: %w", err)
		}
		out = append(out, s)
	}
	next := ""
	if len(rows) == int(params.MaxRows) {
		last := rows[len(rows)-1]
		next = pagecursor.Cursor{At: last.CreatedAt, ID: last.ID.String()}.String()
	}
	return out, next, nil
}

// SagaDetail is a saga with its history and the order of its compensations.
type SagaDetail struct {
	Saga *saga.Saga
	// History is every change of its state, oldest first.
	History []saga.Transition
	// CompensationOrder is the indexes of the steps that are compensated — or would be, should
	// the saga compensate now — in that order: the confirmed (or compensating, compensated,
	// compensation-stuck) steps, last first, without the steps whose stored definition says
	// "undo": "none". Empty for a COMPLETED saga.
	CompensationOrder []int
}

// Saga returns a saga in scope with its history, or ErrNotFound.
func (o *Ops) Saga(ctx context.Context, scope Scope, id uuid.UUID) (*SagaDetail, error) {
	s, err := o.sagaInScope(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	history, err := o.sagas.History(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	order, err := o.compensationOrder(ctx, s)
	if err != nil {
		return nil, err
	}
	return &SagaDetail{Saga: s, History: history, CompensationOrder: order}, nil
}

func (o *Ops) compensationOrder(ctx context.Context, s *saga.Saga) ([]int, error) {
	order := []int{}
	if s.State == saga.StateCompleted {
		return order, nil
	}
	def, err := sagadef.Get(ctx, o.pool, s.Name)
	switch {
	case errors.Is(err, sagadef.ErrNotFound):
		def = sagadef.Definition{} // a definition in Go: every step has an undo as far as we know
	case err != nil:
		return nil, fmt.Errorf("ops: definition of saga %s: %w", s.ID, err)
	}
	for k := len(s.Steps) - 1; k >= 0; k-- {
		step := s.Steps[k]
		switch step.State {
		case saga.StepConfirmed, saga.StepCompensating, saga.StepCompensated, saga.StepCompensationStuck:
		default:
			continue
		}
		if k < len(def.Steps) && def.Steps[k].Undo.Kind == sagadef.UndoNone {
			continue
		}
		order = append(order, k)
	}
	return order, nil
}

// ResolveSaga records an operator's decision on a saga STUCK on a compensation (saga.Client.Resolve:
// the history records actor as "operator:{actor}"). reason is required (UTF-8, no NUL, at most
// 1000 bytes). Errors: ErrNotFound (missing or out of scope), a *FieldError, or saga's
// ErrNotStuck, ErrResolveEffect; nothing changes then.
func (o *Ops) ResolveSaga(ctx context.Context, scope Scope, id uuid.UUID, decision saga.Decision, actor, reason string) (*saga.Saga, error) {
	if _, err := ParseDecision(string(decision)); err != nil {
		return nil, err
	}
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	if _, err := o.sagaInScope(ctx, scope, id); err != nil {
		return nil, err
	}
	s, err := o.sagas.Resolve(ctx, id, decision, actor, reason)
	if errors.Is(err, saga.ErrNotFound) {
		return nil, ErrNotFound
	}
	return s, err
}

// sagaInScope reads a saga; ErrNotFound when it is missing or outside scope.
func (o *Ops) sagaInScope(ctx context.Context, scope Scope, id uuid.UUID) (*saga.Saga, error) {
	s, err := o.sagas.Get(ctx, id)
	if errors.Is(err, saga.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	if !scope.Sees(s.TenantID) {
		return nil, ErrNotFound
	}
	return s, nil
}

// tenantIDs returns the tenants a listing reads for a filter on tenant ("" for any) within s: that
// tenant (none when s does not see it), s's tenants, or for a scope of every tenant those that
// every returns (a skip scan of the table's tenant index).
func (s Scope) tenantIDs(ctx context.Context, tenant string, every func(context.Context) ([]string, error)) ([]string, error) {
	switch {
	case tenant != "" && !s.Sees(tenant):
		return nil, nil
	case tenant != "":
		return []string{tenant}, nil
	case s.Tenants != nil:
		return s.Tenants, nil
	}
	return every(ctx)
}

// read runs fn in a read-only transaction whose statements are planned for their parameters'
// values every time (plan_cache_mode force_custom_plan): a generic plan of the listings' optional
// filters and time bounds can lose their indexes.
func (o *Ops) read(ctx context.Context, fn func(q *dbsqlc.Queries) error) error {
	return pgx.BeginTxFunc(ctx, o.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.EffectListPlanCustom(ctx); err != nil { // the statement is not EffectList's alone
			return err
		}
		return fn(q)
	})
}

// checkTenant refuses a tenant filter that cannot name a tenant ("" is any).
func checkTenant(tenant string) error {
	if tenant == "" {
		return nil
	}
	if err := ident.ValidateTenantID(tenant); err != nil {
		return &FieldError{Field: "tenant", Message: jsonx.SafeText(err.Error())}
	}
	return nil
}

// checkField refuses a text field Postgres cannot store (invalid UTF-8, NUL) or longer than max
// bytes.
func checkField(field, s string, max int) error {
	if err := checkText(s); err != nil {
		return &FieldError{Field: field, Message: err.Error()}
	}
	if len(s) > max {
		return &FieldError{Field: field, Message: fmt.Sprintf("at most %d bytes", max)}
	}
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
