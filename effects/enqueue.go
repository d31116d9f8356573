package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// EnqueueOpts adjusts an enqueue. Nil means the defaults.
type EnqueueOpts struct {
	// Actor and Reason are written to the audit trail for the insert. Defaults "enqueue" and
	// "enqueued".
	Actor, Reason string
	// ScheduledAt delays the first dispatch. Default: as soon as a reactor is free.
	ScheduledAt time.Time
}

func (o *EnqueueOpts) actorReason() (string, string) {
	actor, reason := "enqueue", "enqueued"
	if o != nil && o.Actor != "" {
		actor = o.Actor
	}
	if o != nil && o.Reason != "" {
		reason = o.Reason
	}
	return actor, reason
}

// EnqueueTx records an effect in tx, the caller's transaction: it exists once tx commits, and
// not if tx rolls back. After the commit a reactor of the client's queue claims it — gives it a
// dispatch job, shared with the other effects waiting then (Config.ClaimInterval) — and
// dispatches it. With EnqueueOpts.ScheduledAt the effect's dispatch job is recorded with it
// instead, due then.
//
// If the tenant already has an effect with the same idempotency key and the same connector, args
// and owner, that effect is returned with Deduplicated set and nothing new is recorded. With other
// args, another connector or another owner the error is ErrIdempotencyConflict. If no effect has
// the key but the tombstone of a pruned one still keeps it (its dedup window has not ended), the
// enqueue is a late duplicate: the error is ErrPruned (a *PrunedError naming the effect) and
// nothing is recorded. Other errors (a bad spec, an unknown connector or one not available to the
// tenant: ErrUnknownConnector, args the connector refuses (its ArgsSchema, or no BusinessKey from them): ErrInvalidArgs) change
// nothing; a database
// error aborts tx, which the caller must roll back.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, spec Spec, opts *EnqueueOpts) (*Effect, error) {
	effects, err := c.EnqueueManyTx(ctx, tx, []Spec{spec}, opts)
	if err != nil {
		return nil, err
	}
	return effects[0], nil
}

// Enqueue is EnqueueTx in a transaction of its own.
func (c *Client) Enqueue(ctx context.Context, spec Spec, opts *EnqueueOpts) (*Effect, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.EnqueueTx(ctx, tx, spec, opts) })
}

// EnqueueMany is EnqueueManyTx in a transaction of its own: every effect is recorded, or none.
func (c *Client) EnqueueMany(ctx context.Context, specs []Spec, opts *EnqueueOpts) ([]*Effect, error) {
	return inTx(ctx, c, func(tx pgx.Tx) ([]*Effect, error) { return c.EnqueueManyTx(ctx, tx, specs, opts) })
}

// EnqueueManyTx is EnqueueTx for many effects at once, with one insert of the effects and one of
// their dispatch jobs, which it records with them (Config.DispatchBatch effects to a job). The
// result is in the order of specs. The same idempotency key twice in specs yields the same effect
// twice when the args agree and ErrIdempotencyConflict when they do not.
//
// The batch fails as a whole: when a spec meets ErrIdempotencyConflict or ErrPruned, the error is
// the first such spec's, and the effects of the other specs may already be written in tx, which the
// caller must roll back (EnqueueMany does).
//
// The enqueue is a span, reckon.enqueue, child of ctx's; its trace context is stored on the
// effects, and their dispatch and everything after it continue that trace (Config.TracerProvider).
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, specs []Spec, opts *EnqueueOpts) ([]*Effect, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	ctx, span := c.tracing.tracer.Start(ctx, spanEnqueue, producerSpan...)
	effects, err := c.enqueueManyTx(ctx, tx, specs, opts)
	err = SchemaError(err)
	if span.IsRecording() {
		span.SetAttributes(attrEffectCount.Int(len(specs)))
		if err == nil && len(effects) == 1 {
			e := effects[0]
			span.SetAttributes(attrEffectID.String(e.ID.String()), attrConnector.String(e.Connector),
				attrTenant.String(e.TenantID), attribute.Bool("reckon.deduplicated", e.Deduplicated))
		}
	}
	endSpan(span, err)
	return effects, err
}

// enqueueBatch is a batch of specs on its way into the effects table. A key twice in the batch is
// one effect, recorded from the first of its specs: unique lists those, and holds and ids are set
// on them only.
type enqueueBatch struct {
	resolved      []*resolvedSpec // one per spec
	unique        []int           // the index of the first spec of each (tenant, idempotency key)
	same          []int           // for each spec, the index in resolved of the spec whose effect it gets
	holds         []*hold         // confirmation holds (confirm.go), nil: none
	ids           []uuid.UUID     // the id of each new effect
	scheduledAt   time.Time
	actor, reason string
	traceContext  json.RawMessage // nil without a span: nothing more is written
}

func (c *Client) enqueueManyTx(ctx context.Context, tx pgx.Tx, specs []Spec, opts *EnqueueOpts) ([]*Effect, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	actor, reason := opts.actorReason()
	if err := jsonx.CheckTexts("EnqueueOpts.Actor", actor, "EnqueueOpts.Reason", reason); err != nil {
		return nil, fmt.Errorf("effects: enqueue: %w", err)
	}
	resolved, unique, same, err := c.resolveBatch(specs)
	if err != nil {
		return nil, err
	}
	if err := c.checkRunsTx(ctx, tx, resolved); err != nil { // run guardrails (run.go)
		return nil, err
	}

	b := &enqueueBatch{resolved: resolved, unique: unique, same: same, actor: actor, reason: reason}
	if opts != nil {
		b.scheduledAt = opts.ScheduledAt
	}
	if b.holds, err = c.holdsOf(resolved, unique, b.scheduledAt); err != nil {
		return nil, err
	}
	b.ids = make([]uuid.UUID, len(specs))
	for _, i := range unique {
		b.ids[i] = uuid.Must(uuid.NewV7())
	}
	b.traceContext = c.tracing.carrierOf(ctx)

	if len(unique) == 1 && b.scheduledAt.IsZero() {
		effect, err := c.insertOneTx(ctx, tx, b)
		if err != nil {
			return nil, err
		}
		result := make([]*Effect, len(specs))
		for i := range result {
			result[i] = effect
		}
		return result, nil
	}
	return c.insertBatchTx(ctx, tx, b)
}

// resolveBatch resolves specs and checks their owners. It returns the index of the first spec of
// each (tenant, idempotency key) in unique, and for each spec the index of the spec whose effect
// it gets in same: a later spec with the key and other args (or another connector) is
// ErrIdempotencyConflict. A later spec with another key and the deduplicating business key of an
// earlier one (Connector.DedupByBusinessKey) is that one's replay too, or ErrBusinessKeyConflict
// with other args or another owner.
func (c *Client) resolveBatch(specs []Spec) (resolved []*resolvedSpec, unique, same []int, err error) {
	resolved, same = make([]*resolvedSpec, len(specs)), make([]int, len(specs))
	first := map[[2]string]int{}    // (tenant, key) → index of its first spec
	firstBiz := map[[3]string]int{} // (tenant, connector, business key) → index of its first spec
	for i, spec := range specs {
		res, err := c.registry.resolve(spec)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := c.checkOwner(ptr(spec.Owner)); err != nil {
			return nil, nil, nil, err
		}
		resolved[i] = res
		k, biz := [2]string{res.tenantID, res.idempotencyKey}, [3]string{res.tenantID, res.connector.Name, res.dedupKey()}
		j, ok := first[k]
		if !ok && biz[2] != "" {
			if j, ok = firstBiz[biz]; ok && (!jsonx.Equal(resolved[j].args, res.args) || resolved[j].spec.Owner != res.spec.Owner) {
				return nil, nil, nil, fmt.Errorf("%w: business key %q appears twice in the batch with different args", ErrBusinessKeyConflict, biz[2])
			}
		}
		if ok {
			if resolved[j].connector.Name != res.connector.Name || !jsonx.Equal(resolved[j].args, res.args) {
				return nil, nil, nil, fmt.Errorf("%w: key %q appears twice in the batch with different args", ErrIdempotencyConflict, res.idempotencyKey)
			}
			if r := resolved[j]; r.spec.AsyncTimeout == 0 && !r.spec.AsyncHardTimeout {
				// The effect takes the async options of the first of its specs that has any.
				r.spec.AsyncTimeout, r.spec.AsyncHardTimeout = res.spec.AsyncTimeout, res.spec.AsyncHardTimeout
			}
			first[k], same[i] = j, j
			continue
		}
		first[k], same[i] = i, i
		if biz[2] != "" {
			firstBiz[biz] = i
		}
		unique = append(unique, i)
	}
	return resolved, unique, same, nil
}

// holdsOf returns the confirmation hold of each unique spec (confirm.go), indexed like resolved.
// An effect held for confirmation cannot be scheduled.
func (c *Client) holdsOf(resolved []*resolvedSpec, unique []int, scheduledAt time.Time) ([]*hold, error) {
	holds := make([]*hold, len(resolved))
	for _, i := range unique {
		h, err := c.holdOf(resolved[i])
		if err != nil {
			return nil, err
		}
		if h != nil && !scheduledAt.IsZero() {
			return nil, fmt.Errorf("effects: %s: an effect held for confirmation cannot be scheduled (EnqueueOpts.ScheduledAt)", resolved[i].connector.Name)
		}
		holds[i] = h
	}
	return holds, nil
}

// insertOneTx records the one effect of b (the common case of a service) with the single-row
// insert, and no job. The effect is left for the claimers of the queue, which give it a dispatch
// job, shared with the effects other transactions enqueued meanwhile (claim.go) — once confirmed,
// if held. An effect that already holds the key is returned instead (existingFor).
func (c *Client) insertOneTx(ctx context.Context, tx pgx.Tx, b *enqueueBatch) (*Effect, error) {
	i := b.unique[0]
	r, h := b.resolved[i], b.holds[i]
	params := effectInsert(b.ids[i], r, h)
	params.Queue, params.TraceContext, params.Actor, params.Reason = &c.config.Queue, b.traceContext, b.actor, b.reason
	var keys orderKeys // an ordered effect waits for its key's turn (ordering.go)
	keys.add(r)
	seqs, err := keys.lockTx(ctx, tx, len(keys.keys))
	if err != nil {
		return nil, err
	}
	if seqs != nil {
		params.OrderSeq = &seqs[0]
	}
	c.waitInOrder(&params)
	row, err := dbsqlc.New(tx).EffectInsert(ctx, params)
	switch {
	case err == nil && !keys.empty(): // the hand-on notifies when the effect's turn comes
		if err := keys.handOnTx(ctx, tx); err != nil {
			return nil, err
		}
		return effectFromRow(row), nil
	case err == nil:
		if h == nil { // a held effect waits for its confirmation, which notifies
			if err := c.notifyEnqueuedTx(ctx, tx); err != nil {
				return nil, err
			}
		}
		return effectFromRow(row), nil
	case postgres.NoRows(err):
		return c.existingFor(ctx, tx, r)
	default:
		return nil, fmt.Errorf("effects: insert effect: %w", err)
	}
}

// insertBatchTx records the effects of b with one insert of the effects and one of their dispatch
// jobs (insertBatchRowsTx), and returns the effect of each spec: the one inserted, or the one that
// already held its key (existingFor). The jobs that carry no inserted effect are deleted.
func (c *Client) insertBatchTx(ctx context.Context, tx pgx.Tx, b *enqueueBatch) ([]*Effect, error) {
	jobs, inserted, err := c.insertBatchRowsTx(ctx, tx, b)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]*Effect, len(inserted))
	used := make(map[int64]bool, len(jobs)) // the jobs that carry an effect inserted now
	for _, row := range inserted {
		byID[row.ID] = effectFromRow(row)
		if row.JobID != nil {
			used[*row.JobID] = true
		}
	}
	effectOf := make(map[int]*Effect, len(b.unique)) // index of a unique spec → its effect
	for _, i := range b.unique {
		effect, ok := byID[b.ids[i]]
		if !ok {
			if effect, err = c.existingFor(ctx, tx, b.resolved[i]); err != nil {
				return nil, err
			}
		}
		effectOf[i] = effect
	}
	var unused []int64 // every effect of theirs was already recorded
	for _, id := range jobs {
		if !used[id] {
			unused = append(unused, id)
		}
	}
	if err := c.deleteJobs(ctx, tx, unused); err != nil {
		return nil, err
	}
	result := make([]*Effect, len(b.resolved))
	for i := range b.resolved {
		result[i] = effectOf[b.same[i]]
	}
	return result, nil
}

// insertBatchRowsTx inserts the dispatch jobs of b's effects that are not held (a held one gets
// none until it is confirmed and claimed), then the effects, each naming its job. It returns the
// jobs, and the effects inserted: not those whose key was already taken.
func (c *Client) insertBatchRowsTx(ctx context.Context, tx pgx.Tx, b *enqueueBatch) (jobs []int64, inserted []dbsqlc.ReckonEffect, err error) {
	var jobbedIDs []uuid.UUID
	var timeouts []int32
	var keys orderKeys
	jobbed := make([]int, len(b.unique)) // index in jobbedIDs, -1 when held or ordered
	for n, i := range b.unique {
		if keys.add(b.resolved[i]); b.holds[i] != nil || b.resolved[i].orderingKey != "" {
			jobbed[n] = -1
			continue
		}
		jobbed[n] = len(jobbedIDs)
		jobbedIDs, timeouts = append(jobbedIDs, b.ids[i]), append(timeouts, timeoutMS(b.resolved[i].connector))
	}
	var jobOf []int
	if len(jobbedIDs) > 0 {
		if jobOf, jobs, err = c.insertDispatchJobs(ctx, tx, jobbedIDs, timeouts, nil, b.scheduledAt); err != nil {
			return nil, nil, err
		}
	}
	params := dbsqlc.EffectInsertManyParams{Actor: b.actor, Reason: b.reason}
	var seqs []int64
	if !keys.empty() { // ordered effects wait for their keys' turns (ordering.go)
		if seqs, err = keys.lockTx(ctx, tx, len(keys.keys)); err != nil {
			return nil, nil, err
		}
		params.OrderQueue, params.OrderingKeys = &c.config.Queue, make([]string, len(b.unique))
		params.OrderSeqs = make([]int64, len(b.unique))
		if !b.scheduledAt.IsZero() {
			params.NotBefore = &b.scheduledAt
		}
	}
	if b.traceContext != nil { // else NULL: every effect's is NULL
		params.TraceContexts = make([]json.RawMessage, len(b.unique))
		for n := range b.unique {
			params.TraceContexts[n] = b.traceContext
		}
	}
	for n, i := range b.unique {
		e := effectInsert(b.ids[i], b.resolved[i], b.holds[i])
		switch {
		case e.OrderingKey != nil: // waits for its key's turn: no queue yet
			params.OrderingKeys[n], params.OrderSeqs[n] = *e.OrderingKey, seqs[0]
			seqs = seqs[1:]
		case b.holds[i] != nil: // left for the claimers of the queue once confirmed
			e.Queue = &c.config.Queue
		default:
			e.JobID = &jobs[jobOf[jobbed[n]]]
		}
		appendEffectInsert(&params, n, len(b.unique), e)
	}
	if inserted, err = dbsqlc.New(tx).EffectInsertMany(ctx, params); err != nil {
		return nil, nil, fmt.Errorf("effects: insert effects: %w", err)
	}
	if !keys.empty() {
		if err := keys.handOnTx(ctx, tx); err != nil {
			return nil, nil, err
		}
	}
	return jobs, inserted, nil
}

// insertDispatchJobs inserts the dispatch jobs of the effects ids (timeouts their connectors'
// timeouts in milliseconds): one job per effect when there is one effect (or Config.DispatchBatch
// is 1), else one job per Config.DispatchBatch effects. traces, when not nil, holds the effects'
// stored trace contexts: a job of one effect carries its effect's, so that the job's span is in
// the effect's trace (without traces, the tracing middleware gives the jobs ctx's). It returns
// the job of each (jobOf[i] indexes jobs for ids[i]). Sharing a job spends River's insert, fetch and completion once per
// batch instead of once per effect; the effects of a batch are dispatched concurrently by the
// worker that fetches it. EnqueueManyTx and the claimers (claim.go) insert their jobs here.
func (c *Client) insertDispatchJobs(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, timeouts []int32, traces []json.RawMessage, scheduledAt time.Time) (jobOf []int, jobs []int64, err error) {
	size := c.config.DispatchBatch
	jobOf = make([]int, len(ids))
	var params []river.InsertManyParams
	for start := 0; start < len(ids); start += size {
		end := min(start+size, len(ids))
		if end-start == 1 {
			p := c.dispatchInsertParams(ids[start], timeouts[start], scheduledAt)
			if traces != nil && traces[start] != nil {
				p.InsertOpts.Metadata = withMetadata(nil, jobTraceKey, traces[start])
			}
			params = append(params, p)
		} else {
			args := dispatchArgs{EffectIDs: ids[start:end:end]}
			for _, t := range timeouts[start:end] {
				args.TimeoutMS = max(args.TimeoutMS, t)
			}
			params = append(params, river.InsertManyParams{Args: args, InsertOpts: c.dispatchInsertOpts(scheduledAt)})
		}
		for i := start; i < end; i++ {
			jobOf[i] = len(params) - 1
		}
	}
	res, err := c.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, nil, fmt.Errorf("effects: insert dispatch jobs: %w", err)
	}
	jobs = make([]int64, len(res))
	for k, r := range res {
		jobs[k] = r.Job.ID
	}
	return jobOf, jobs, nil
}

// deleteJobs deletes dispatch jobs inserted for effects that already existed.
func (c *Client) deleteJobs(ctx context.Context, tx pgx.Tx, ids []int64) error {
	for _, id := range ids {
		if _, err := c.river.JobDeleteTx(ctx, tx, id); err != nil {
			return fmt.Errorf("effects: delete unneeded dispatch job: %w", err)
		}
	}
	return nil
}

// existingFor returns the effect holding r's idempotency key, marked deduplicated, after an insert
// of r found the key taken; ErrIdempotencyConflict when the effect was recorded with another
// connector or other args. When no effect holds the key: the effect holding r's deduplicating
// business key (businessKeyHolder), else ErrPruned when a tombstone keeps the key.
func (c *Client) existingFor(ctx context.Context, tx pgx.Tx, r *resolvedSpec) (*Effect, error) {
	q := dbsqlc.New(tx)
	row, err := q.EffectGetByIdempotencyKey(ctx, dbsqlc.EffectGetByIdempotencyKeyParams{TenantID: r.tenantID, IdempotencyKey: r.idempotencyKey})
	if postgres.NoRows(err) && r.dedupKey() != "" {
		if effect, err := businessKeyHolder(ctx, q, r); effect != nil || err != nil {
			return effect, err
		}
	}
	if postgres.NoRows(err) {
		return nil, prunedKeyError(ctx, q, r.tenantID, r.idempotencyKey)
	}
	if err != nil {
		return nil, fmt.Errorf("effects: read effect with key %q: %w", r.idempotencyKey, err)
	}
	same, err := q.EffectArgsEqual(ctx, dbsqlc.EffectArgsEqualParams{ID: row.ID, Args: r.args})
	if err != nil {
		return nil, fmt.Errorf("effects: compare args of key %q: %w", r.idempotencyKey, err)
	}
	if !same || row.Connector != r.connector.Name || deref(row.Owner) != r.spec.Owner {
		return nil, fmt.Errorf("%w: key %q belongs to effect %s (%s, owner %q)", ErrIdempotencyConflict, r.idempotencyKey, row.ID, row.Connector, deref(row.Owner))
	}
	effect := effectFromRow(row)
	effect.Deduplicated = true
	return effect, nil
}

// businessKeyHolder returns the effect that holds r's deduplicating business key, marked
// deduplicated, when its args and owner are r's; ErrBusinessKeyConflict when they are not; nil
// when no effect holds the key (any more: its holder FAILED since the insert).
func businessKeyHolder(ctx context.Context, q *dbsqlc.Queries, r *resolvedSpec) (*Effect, error) {
	key := r.dedupKey()
	row, err := q.EffectGetByBusinessKey(ctx, dbsqlc.EffectGetByBusinessKeyParams{TenantID: r.tenantID, Connector: r.connector.Name, BusinessKey: &key})
	if postgres.NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("effects: read effect with business key %q: %w", key, err)
	}
	same, err := q.EffectArgsEqual(ctx, dbsqlc.EffectArgsEqualParams{ID: row.ID, Args: r.args})
	if err != nil {
		return nil, fmt.Errorf("effects: compare args of business key %q: %w", key, err)
	}
	if !same || deref(row.Owner) != r.spec.Owner {
		return nil, fmt.Errorf("%w: business key %q belongs to effect %s (%s, owner %q)", ErrBusinessKeyConflict, key, row.ID, row.State, deref(row.Owner))
	}
	effect := effectFromRow(row)
	effect.Deduplicated = true
	return effect, nil
}

// prunedKeyError explains an insert that found its idempotency key taken and no effect holding it:
// the key's effect was pruned, and a live tombstone keeps the key (*PrunedError), or none does —
// the effect was pruned, without a dedup window, while the insert ran.
func prunedKeyError(ctx context.Context, q *dbsqlc.Queries, tenantID, key string) error {
	tomb, err := q.EffectTombstoneGetLive(ctx, dbsqlc.EffectTombstoneGetLiveParams{TenantID: tenantID, IdempotencyKey: key})
	switch {
	case err == nil:
		return &PrunedError{
			IdempotencyKey: key, EffectID: tomb.EffectID, State: State(tomb.State),
			SettledAt: tomb.SettledAt, PrunedAt: tomb.PrunedAt, ExpiresAt: tomb.ExpiresAt,
		}
	case postgres.NoRows(err):
		return fmt.Errorf("effects: key %q was taken when the insert ran, but its effect has since been pruned and no tombstone keeps the key", key)
	default:
		return fmt.Errorf("effects: read tombstone of key %q: %w", key, err)
	}
}

func timeoutMS(c *Connector) int32 { return int32(c.Timeout / time.Millisecond) }

// effectInsert is the insert of the new effect id as r, its resolved spec, makes it, held for
// confirmation when h is not nil: every path that records an effect starts here and adds what it
// owns — the job or lease that calls the effect, the queue of its claimers, what it compensates,
// its trace context, actor and reason. Its nullable values point into r and h, which outlive the
// insert, rather than at copies.
func effectInsert(id uuid.UUID, r *resolvedSpec, h *hold) dbsqlc.EffectInsertParams {
	e := dbsqlc.EffectInsertParams{
		ID: id, TenantID: r.tenantID, Connector: r.connector.Name, Args: r.args,
		IdempotencyKey: r.idempotencyKey, BusinessKey: nonZero(&r.businessKey),
		Policy: dbsqlc.ReckonEffectPolicy(PolicyOf(r.connector)), Tags: tagStrings(r.connector.Tags),
		MaxAttempts: int32(r.maxAttempts), TimeoutMs: timeoutMS(r.connector),
		RunID: nonZero(&r.spec.RunID), TurnID: r.spec.TurnID, TurnGroup: nonZero(&r.spec.TurnGroup),
		Owner: nonZero(&r.spec.Owner), AsyncHardTimeout: r.spec.AsyncHardTimeout,
		OrderingKey: nonZero(&r.orderingKey), BusinessKeyDedup: r.dedupKey() != "",
	}
	if r.spec.AsyncTimeout > 0 {
		ms := int32(r.spec.AsyncTimeout / time.Millisecond)
		e.AsyncTimeoutMs = &ms
	}
	if h != nil {
		awaiting := string(ConfirmationAwaiting)
		e.Confirmation, e.ConfirmationPrompt, e.ConfirmationFourEyes = &awaiting, &h.prompt, &h.fourEyes
		e.ConfirmationTtlMs = nonZero(&h.ttlMS)
	}
	return e
}

// appendEffectInsert appends e, the n-th of count effects, to the columns of a multi-row insert.
// The async options are sent only when an effect has them (NULL columns otherwise).
func appendEffectInsert(m *dbsqlc.EffectInsertManyParams, n, count int, e dbsqlc.EffectInsertParams) {
	m.Ids = append(m.Ids, e.ID)
	m.TenantIds = append(m.TenantIds, e.TenantID)
	m.Connectors = append(m.Connectors, e.Connector)
	m.Args = append(m.Args, e.Args)
	m.IdempotencyKeys = append(m.IdempotencyKeys, e.IdempotencyKey)
	m.BusinessKeys = append(m.BusinessKeys, deref(e.BusinessKey))
	m.Policies = append(m.Policies, string(e.Policy))
	m.Tags = append(m.Tags, strings.Join(e.Tags, ","))
	m.MaxAttempts = append(m.MaxAttempts, e.MaxAttempts)
	m.TimeoutMs = append(m.TimeoutMs, e.TimeoutMs)
	m.RunIds = append(m.RunIds, deref(e.RunID))
	m.TurnIds = append(m.TurnIds, deref(e.TurnID))
	m.TurnGroups = append(m.TurnGroups, deref(e.TurnGroup))
	m.JobIds = append(m.JobIds, deref(e.JobID))
	m.Owners = append(m.Owners, deref(e.Owner))
	m.Queues = append(m.Queues, deref(e.Queue))
	m.Confirmations = append(m.Confirmations, deref(e.Confirmation))
	m.ConfirmationPrompts = append(m.ConfirmationPrompts, deref(e.ConfirmationPrompt))
	m.ConfirmationTtlMs = append(m.ConfirmationTtlMs, deref(e.ConfirmationTtlMs))
	m.ConfirmationFourEyes = append(m.ConfirmationFourEyes, deref(e.ConfirmationFourEyes))
	if e.BusinessKeyDedup {
		if m.BusinessKeyDedups == nil {
			m.BusinessKeyDedups = make([]bool, count)
		}
		m.BusinessKeyDedups[n] = true
	}
	if e.AsyncTimeoutMs != nil || e.AsyncHardTimeout {
		if m.AsyncTimeoutMs == nil {
			m.AsyncTimeoutMs, m.AsyncHardTimeouts = make([]int32, count), make([]bool, count)
		}
		m.AsyncTimeoutMs[n], m.AsyncHardTimeouts[n] = deref(e.AsyncTimeoutMs), e.AsyncHardTimeout
	}
}

func tagStrings(tags []Tag) []string {
	s := make([]string, len(tags))
	for i, tag := range tags {
		s[i] = string(tag)
	}
	return s
}
