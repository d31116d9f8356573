package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/txn"
)

// Owner is the effects owner (effects.Spec.Owner) of every saga effect: steps and compensations.
const Owner = "saga"

// Client starts and inspects sagas and advances them. It is a plugin of an effects.Client
// (effects.Config.Plugins): it registers its settle hook there, so that a reactor built on that
// effects client advances sagas in the same transaction as the transitions of their effects, and
// it enqueues the sagas' effects through it. It is safe for concurrent use.
type Client struct {
	pool    *pgxpool.Pool
	queries *dbsqlc.Queries
	logger  *slog.Logger
	metrics *metrics
	unknown DefinitionLoader

	mu      sync.RWMutex
	effects *effects.Client // the effects client it is installed in
	spans   trace.Tracer    // from effects' TracerProvider, once installed
	defs    map[string]*Definition
}

// DefinitionLoader is called, in the transaction at hand, when a saga names a definition the
// client has not registered — a start (StartTx) or a reactor advancing a saga — before the name is
// refused with ErrUnknownDefinition. It may Register it, e.g. from the definitions stored in the
// database (a sagadef.Syncer's Load); the lookup is then tried again. Its error is returned (a database
// error aborts tx).
type DefinitionLoader func(ctx context.Context, tx pgx.Tx, c *Client, name string) error

// Config configures a Client. Every field has a default.
type Config struct {
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's Prometheus metrics. Default: none (not exported).
	Registerer prometheus.Registerer
	// OnUnknownDefinition loads a definition the client does not have. Default: none (an unknown
	// name is refused).
	OnUnknownDefinition DefinitionLoader
}

// NewClient returns a Client on pool. Register its definitions and pass it in
// effects.Config.Plugins (the effects client on the same database) before using it.
func NewClient(pool *pgxpool.Pool, config *Config) (*Client, error) {
	if pool == nil {
		return nil, errors.New("saga: NewClient needs a pool")
	}
	if config == nil {
		config = &Config{}
	}
	cfg := *config
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Client{
		pool: pool, queries: dbsqlc.New(pool), logger: cfg.Logger, unknown: cfg.OnUnknownDefinition,
		defs: map[string]*Definition{},
	}
	m, err := newMetrics(cfg.Registerer, c)
	if err != nil {
		return nil, err
	}
	c.metrics = m
	return c, nil
}

// Install makes the client a plugin of the effects client being built (effects.Config.Plugins):
// its settle hook advances the sagas whose effects (Spec.Owner Owner) settle, and the counts of
// sagas by definition and state (reckon_sagas) join the shared statistics as StatsPart.
func (c *Client) Install(host *effects.PluginHost) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.effects != nil {
		return errors.New("saga: client already installed in an effects client")
	}
	if err := host.OnSettle(Owner, c.onSettle); err != nil {
		return fmt.Errorf("saga: %w", err)
	}
	if err := host.AddStats(StatsPart, computeStats); err != nil {
		return fmt.Errorf("saga: %w", err)
	}
	c.effects = host.Client()
	c.spans = c.effects.TracerProvider().Tracer(TracerName)
	return nil
}

// effectsClient returns the effects client the client is installed in.
func (c *Client) effectsClient() (*effects.Client, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.effects == nil {
		return nil, ErrNotInstalled
	}
	return c.effects, nil
}

// Register adds a definition. It refuses an invalid one (see Definition and Step) and a name
// registered already. Register every definition before starting the reactor: a reactor that meets
// a saga of a definition it does not know leaves its effects unsettled (the settle hook fails and
// the effects are tried again later).
func (c *Client) Register(def Definition) error {
	if err := def.validate(); err != nil {
		return err
	}
	def.Steps = append([]Step(nil), def.Steps...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.defs[def.Name]; ok {
		return fmt.Errorf("saga: definition %q is already registered", def.Name)
	}
	c.defs[def.Name] = &def
	return nil
}

// MustRegister is Register that panics on error, for definitions declared at program start.
func (c *Client) MustRegister(def Definition) {
	if err := c.Register(def); err != nil {
		panic(err)
	}
}

// Registered reports whether a definition of that name is registered.
func (c *Client) Registered(name string) bool {
	_, err := c.definition(name)
	return err == nil
}

// lookup is definition with the OnUnknownDefinition fallback.
func (c *Client) lookup(ctx context.Context, tx pgx.Tx, name string) (*Definition, error) {
	def, err := c.definition(name)
	if err == nil {
		return def, nil
	}
	if c.unknown == nil {
		return nil, err
	}
	if ferr := c.unknown(ctx, tx, c, name); ferr != nil {
		return nil, fmt.Errorf("saga: load definition %q: %w", name, ferr)
	}
	return c.definition(name)
}

func (c *Client) definition(name string) (*Definition, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	def, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: register it with Client.Register", ErrUnknownDefinition, name)
	}
	return def, nil
}

// StartOpts adjusts a start. Nil means the defaults.
type StartOpts struct {
	// TenantID of the saga and its effects. Default effects.DefaultTenant.
	TenantID string
	// Key makes the start idempotent: starting again with the same key (same tenant) returns the
	// existing saga, marked Deduplicated, when its definition and input agree, and
	// ErrStartKeyConflict otherwise. Default: none (every start is a new saga).
	Key string
	// Actor and Reason go to the saga's history and the first effect's audit trail. Defaults
	// "saga" and "saga started".
	Actor, Reason string
}

// StartTx starts a saga of the named definition in tx, the caller's transaction: the saga row and
// its first step's effect (with its dispatch job) exist once tx commits, and neither if it rolls
// back. A reactor then runs the steps; each next step is enqueued in the transaction that confirms
// the one before.
//
// input is a json.RawMessage, []byte of JSON, or a value encoding/json marshals (nil is {}).
// Errors: ErrUnknownDefinition, ErrStartKeyConflict, an input that is not JSON, or the first
// step's Effect failing or being refused by effects (a bad spec, an unknown connector) change
// nothing; a database error aborts tx, which the caller must roll back.
func (c *Client) StartTx(ctx context.Context, tx pgx.Tx, name string, input any, opts *StartOpts) (*Saga, error) {
	if opts == nil {
		opts = &StartOpts{}
	}
	// Text Postgres cannot store would abort tx: refuse it first.
	if err := jsonx.CheckTexts("name", name, "StartOpts.TenantID", opts.TenantID, "StartOpts.Key", opts.Key,
		"StartOpts.Actor", opts.Actor, "StartOpts.Reason", opts.Reason); err != nil {
		return nil, fmt.Errorf("saga: start: %w", err)
	}
	def, err := c.lookup(ctx, tx, name)
	if err != nil {
		return nil, err
	}
	data, err := jsonx.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("saga %s: input: %w", name, err)
	}
	tenant := opts.TenantID
	if tenant == "" {
		tenant = effects.DefaultTenant
	}
	actor, reason := opts.Actor, opts.Reason
	if actor == "" {
		actor = "saga"
	}
	if reason == "" {
		reason = "saga started"
	}
	q := dbsqlc.New(tx)
	var startKey *string
	if opts.Key != "" {
		startKey = &opts.Key
		existing, err := q.SagaGetByStartKey(ctx, dbsqlc.SagaGetByStartKeyParams{TenantID: tenant, StartKey: startKey})
		switch {
		case err == nil:
			if existing.Name != name || !jsonx.Equal(existing.Input, data) {
				return nil, fmt.Errorf("%w: key %q belongs to saga %s (%s)", ErrStartKeyConflict, opts.Key, existing.ID, existing.Name)
			}
			s, err := c.load(ctx, q, existing)
			if err != nil {
				return nil, err
			}
			s.Deduplicated = true
			return s, nil
		case !postgres.NoRows(err):
			return nil, fmt.Errorf("saga %s: read start key %q: %w", name, opts.Key, err)
		}
	}

	id := uuid.Must(uuid.NewV7())
	in := Input{SagaID: id, TenantID: tenant, Name: name, Step: 0, Data: data}
	spec, err := build(def.Steps[0].Effect, in)
	if err == nil {
		spec, err = checkSpec(spec, tenant, StepKey(id, 0))
	}
	if err != nil {
		return nil, fmt.Errorf("saga %s: step 0 (%s): %w", name, def.Steps[0].Name, err)
	}
	// A savepoint: a start that fails past this point — above all one that loses a race for its
	// start key — leaves nothing behind in tx, not even the first step's effect.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("saga %s: savepoint: %w", name, err)
	}
	s, err := c.startInSavepoint(ctx, sp, start{def: def, name: name, id: id, tenant: tenant, startKey: startKey, data: data,
		spec: spec, actor: actor, reason: reason, key: opts.Key})
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("saga %s: release savepoint: %w", name, err)
	}
	c.metrics.started.WithLabelValues(name).Inc()
	return s, nil
}

// start is a saga about to be written: its definition, identity, input and first step's effect.
type start struct {
	def                *Definition
	name               string
	id                 uuid.UUID
	tenant             string
	startKey           *string
	data               json.RawMessage
	spec               effects.Spec
	actor, reason, key string
}

// startInSavepoint writes a new saga and its first step's effect in sp. It is a span,
// reckon.saga.start, child of ctx's: the first step's effect, enqueued under it, keeps its trace,
// and so does every later move of the saga.
func (c *Client) startInSavepoint(ctx context.Context, sp pgx.Tx, st start) (_ *Saga, err error) {
	def, name, id, tenant, startKey, data, spec, actor, reason, key := st.def, st.name, st.id, st.tenant, st.startKey, st.data, st.spec, st.actor, st.reason, st.key
	q := dbsqlc.New(sp)
	ec, err := c.effectsClient()
	if err != nil {
		return nil, err
	}
	ctx, span := c.tracer().Start(ctx, spanStart)
	defer func() { endSpan(span, err) }()
	if span.IsRecording() {
		span.SetAttributes(attrSagaID.String(id.String()), attrSagaName.String(name), attrTenant.String(tenant))
	}
	effect, err := ec.EnqueueTx(ctx, sp, spec, &effects.EnqueueOpts{Actor: actor, Reason: fmt.Sprintf("saga %s step 0 (%s)", name, def.Steps[0].Name)})
	if err != nil {
		return nil, fmt.Errorf("saga %s: step 0 (%s): %w", name, def.Steps[0].Name, err)
	}
	row, err := q.SagaInsert(ctx, dbsqlc.SagaInsertParams{
		ID: id, TenantID: tenant, Name: name, StartKey: startKey, Input: data, StepCount: int32(len(def.Steps)),
	})
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: key %q was taken concurrently; start again", ErrStartKeyConflict, key)
	}
	if err != nil {
		return nil, fmt.Errorf("saga %s: insert: %w", name, err)
	}
	if err := q.SagaStepInsert(ctx, dbsqlc.SagaStepInsertParams{SagaID: id, Idx: 0, Name: def.Steps[0].Name, EffectID: effect.ID}); err != nil {
		return nil, fmt.Errorf("saga %s: insert step 0: %w", name, err)
	}
	if err := q.SagaTransitionInsert(ctx, dbsqlc.SagaTransitionInsertParams{
		SagaID: id, ToState: dbsqlc.ReckonSagaStateRUNNING, Step: 0, Actor: actor, Reason: reason,
	}); err != nil {
		return nil, fmt.Errorf("saga %s: record start: %w", name, err)
	}
	return c.load(ctx, q, row)
}

// Start is StartTx in a transaction of its own.
func (c *Client) Start(ctx context.Context, name string, input any, opts *StartOpts) (*Saga, error) {
	var s *Saga
	err := txn.Run(ctx, c.pool, c.logger, func(tx pgx.Tx) error {
		var err error
		s, err = c.StartTx(ctx, tx, name, input, opts)
		return err
	})
	return s, err
}

// Get returns the saga with id and its steps, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id uuid.UUID) (*Saga, error) {
	return c.get(ctx, c.queries, id)
}

// GetTx is Get in tx, the caller's transaction: it sees what tx has written (a saga StartTx
// started in it, say), and takes no lock. ErrNotFound leaves tx usable; a database error aborts
// it.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Saga, error) {
	return c.get(ctx, dbsqlc.New(tx), id)
}

func (c *Client) get(ctx context.Context, q *dbsqlc.Queries, id uuid.UUID) (*Saga, error) {
	row, err := q.SagaGetByID(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("saga: get %s: %w", id, err)
	}
	return c.load(ctx, q, row)
}

func (c *Client) load(ctx context.Context, q *dbsqlc.Queries, row dbsqlc.ReckonSaga) (*Saga, error) {
	steps, err := q.SagaStepList(ctx, row.ID)
	if err != nil {
		return nil, fmt.Errorf("saga: steps of %s: %w", row.ID, err)
	}
	return sagaFromRow(row, steps), nil
}

// History returns the saga's state changes, oldest first (empty for an unknown id).
func (c *Client) History(ctx context.Context, id uuid.UUID) ([]Transition, error) {
	rows, err := c.queries.SagaTransitionList(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("saga: history of %s: %w", id, err)
	}
	out := make([]Transition, len(rows))
	for i, r := range rows {
		out[i] = Transition{To: State(r.ToState), Step: int(r.Step), Actor: r.Actor, Reason: r.Reason, At: r.At}
		if r.FromState != nil {
			out[i].From = State(*r.FromState)
		}
	}
	return out, nil
}

// ListFilter selects sagas for List. TenantID defaults to effects.DefaultTenant; State and Name
// apply when set.
type ListFilter struct {
	TenantID string
	State    State
	Name     string
	// Limit bounds the page. Default 100, at most 1000.
	Limit int
	// After continues a listing: pass the Cursor of the previous page.
	After *Cursor
}

// Cursor marks where a page of List ended.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// List returns sagas matching filter, newest first, with their steps, and the cursor of the next
// page (nil when this page is the last).
func (c *Client) List(ctx context.Context, filter ListFilter) ([]*Saga, *Cursor, error) {
	params := dbsqlc.SagaListParams{TenantID: filter.TenantID, MaxRows: int32(filter.Limit)}
	if params.TenantID == "" {
		params.TenantID = effects.DefaultTenant
	}
	switch {
	case filter.Limit == 0:
		params.MaxRows = 100
	case filter.Limit < 0 || filter.Limit > 1000:
		return nil, nil, fmt.Errorf("saga: list limit %d out of range (1 to 1000)", filter.Limit)
	}
	if filter.State != "" {
		state := dbsqlc.ReckonSagaState(filter.State)
		if !state.Valid() {
			return nil, nil, fmt.Errorf("saga: unknown state %q", filter.State)
		}
		params.State = &state
	}
	if filter.Name != "" {
		params.Name = &filter.Name
	}
	if filter.After != nil {
		params.CursorCreatedAt, params.CursorID = &filter.After.CreatedAt, &filter.After.ID
	}
	rows, err := c.queries.SagaList(ctx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("saga: list: %w", err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	steps, err := c.queries.SagaStepListBySagas(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("saga: list steps: %w", err)
	}
	bySaga := map[uuid.UUID][]dbsqlc.ReckonSagaStep{}
	for _, st := range steps {
		bySaga[st.SagaID] = append(bySaga[st.SagaID], st)
	}
	out := make([]*Saga, len(rows))
	for i, r := range rows {
		out[i] = sagaFromRow(r, bySaga[r.ID])
	}
	var next *Cursor
	if len(rows) == int(params.MaxRows) {
		last := rows[len(rows)-1]
		next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, next, nil
}
