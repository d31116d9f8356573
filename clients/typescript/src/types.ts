/**
 * The API's request and response shapes (docs/openapi/api.json). Field names are the wire's own,
 * so that a body can be read next to docs/api.md; responses may carry fields added later.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** An effect's state. */
export type EffectState = "PENDING" | "CONFIRMED" | "FAILED" | "UNKNOWN" | "STUCK";

/** A confirmation hold (docs/design.md, "Confirmation holds"). */
export interface Confirmation {
  state: "AWAITING" | "CONFIRMED" | "DECLINED" | "EXPIRED";
  prompt?: string;
  expires_at?: string;
  by?: string;
  at?: string;
  reason?: string;
}

/** One transition of an effect's history, oldest first. */
export interface Transition {
  id: number;
  from?: EffectState;
  to: EffectState;
  actor: string;
  reason?: string;
  attempt?: number;
  at: string;
  detail?: Json;
}

/** An effect, as the API answers it. */
export interface Effect {
  id: string;
  tenant_id: string;
  connector: string;
  state: EffectState;
  policy?: string;
  tags?: string[];
  args: JsonObject;
  idempotency_key: string;
  business_key?: string;
  attempts: number;
  max_attempts: number;
  result?: Json;
  error?: string;
  timeout_ms?: number;
  deadline_at?: string;
  run_id?: string;
  turn_id?: string;
  turn_group?: string;
  compensates_id?: string;
  /** The effect's ordering key; absent for an unordered effect. */
  ordering_key?: string;
  /** On `GET /v1/effects/{id}`: the effect that holds this one back in its ordering key's order. */
  held_by?: string;
  confirmation?: Confirmation;
  created_at: string;
  updated_at: string;
  /** On enqueue: true when the idempotency key named an existing effect. */
  deduplicated?: boolean;
  /** On `GET /v1/effects/{id}`: every transition, oldest first. */
  history?: Transition[];
}

/** A journal position from which the server derives `{turn_group}/d-{decision}/{connector}/{call_index}`. */
export interface JournalPositionBody {
  turn_group: string;
  decision: number;
  call_index: number;
}

/** The body of `POST /v1/effects`. Exactly one of `idempotency_key` and `position` is required. */
export interface EnqueueRequest {
  connector: string;
  args?: JsonObject | null;
  idempotency_key?: string;
  position?: JournalPositionBody;
  business_key?: string;
  run_id?: string;
  turn_id?: string;
  turn_group?: string;
  max_attempts?: number;
  async_timeout_ms?: number;
  async_hard_timeout?: boolean;
  require_confirmation?: boolean;
  confirmation_ttl_ms?: number;
  /** Dispatch the tenant's effects with this key one at a time, in enqueue order. */
  ordering_key?: string;
}

/** Query of `GET /v1/effects`. */
export interface ListEffectsQuery {
  state?: EffectState;
  connector?: string;
  run?: string;
  limit?: number;
  cursor?: string;
}

/** A page of effects; no `next_cursor` on the last page. */
export interface EffectList {
  effects: Effect[];
  next_cursor?: string;
}

/** The body of `POST /v1/effects/{id}/resolve`. */
export interface ResolveRequest {
  to: "CONFIRMED" | "FAILED" | "PENDING";
  reason: string;
  actor?: string;
}

/** The body of cancel, confirm and decline. */
export interface DecisionRequest {
  reason: string;
  actor?: string;
}

/** The body of `POST /v1/callbacks/{correlation_id}`: exactly one of `result` and `error`. */
export type CallbackRequest = { result: Json; error?: never } | { error: string; result?: never };

/** A run: the effects enqueued with one `run_id`, its guardrails and its completion gate. */
export interface Run {
  id: string;
  tenant_id: string;
  steps: number;
  consecutive_failures: number;
  failures: number;
  effects: Partial<Record<EffectState, number>>;
  unresolved: number;
  /** The completion gate: no effect of the run is PENDING or UNKNOWN. */
  settled: boolean;
  max_steps?: number;
  max_consecutive_failures?: number;
  halted?: string;
  cancelled_at?: string;
  cancelled_by?: string;
  cancel_reason?: string;
  created_at?: string;
  updated_at?: string;
}

/** The body of `POST /v1/runs`: create a run with guardrails, or change an existing run's. */
export interface CreateRunRequest {
  id: string;
  max_steps?: number;
  max_consecutive_failures?: number;
}

/** The body of `POST /v1/runs/{id}/cancel`. */
export interface CancelRunRequest {
  reason: string;
  actor?: string;
}

/** The answer of `POST /v1/runs/{id}/cancel`. */
export interface RunCancellation {
  run: Run;
  failed: string[];
  awaiting: string[];
  left: string[];
}

/** A connector's own limit (`limit` of a definition). */
export interface ConnectorOwnLimit {
  rate?: number;
  per_ms?: number;
  burst?: number;
  max_in_flight?: number;
  per_tenant?: boolean;
  break_after?: number;
  break_for_ms?: number;
}

/** An HTTP connector's definition (`POST /v1/connectors`). */
export interface ConnectorDefinition {
  name: string;
  tags?: string[];
  dispatch_url: string;
  status_url?: string;
  compensate_url?: string;
  cancel_url?: string;
  business_key_fields?: string[];
  /** Top-level args fields joined with `:` to make the ordering key when the enqueuer gives none. */
  ordering_key_fields?: string[];
  /** The business key deduplicates: a second enqueue with it while the first effect is not FAILED is its replay, or 409 `business_key_conflict`. */
  dedup_by_business_key?: boolean;
  timeout_ms?: number;
  max_attempts?: number;
  status_check_limit?: number;
  backoff_initial_ms?: number;
  backoff_max_ms?: number;
  unsafe?: boolean;
  async_timeout_ms?: number;
  hard_timeout?: boolean;
  requires_confirmation?: boolean;
  confirmation_prompt?: string;
  limit?: ConnectorOwnLimit;
  /** What the connector does, for people and agents (the MCP gateway's tool description). */
  description?: string;
  /** A JSON Schema of the effects' args (`"type": "object"`), checked at every enqueue. */
  args_schema?: Record<string, unknown>;
  /** The only tenants that may use the connector; absent: every tenant. */
  tenants?: string[];
  created_at?: string;
  updated_at?: string;
}

/** A stored connector definition. */
export type Connector = ConnectorDefinition & { created_at?: string; updated_at?: string };

/** The body of `PUT /v1/connectors/{name}/limit`. */
export interface LimitRequest extends ConnectorOwnLimit {
  reason?: string;
}

/** An operator's limit, as stored. */
export interface OperatorLimit extends LimitRequest {
  connector: string;
  set_by?: string;
  set_at?: string;
}

/** The state of one limit key. */
export interface LimitState {
  connector: string;
  tenant_id: string;
  next_at?: string;
  paused_until?: string;
  failures: number;
  circuit: "closed" | "open" | "half_open";
  open_until?: string;
  in_flight: number;
  waiting: number;
}

/** The body of `POST /v1/connectors/{name}/pause` and `.../resume`. */
export interface ConnectorPauseRequest {
  /** Only this tenant's effects; absent: every tenant's. */
  tenant_id?: string;
  reason: string;
  actor?: string;
}

/** An operator's pause of a connector: no new call of it starts until it is resumed. */
export interface ConnectorPause {
  connector: string;
  /** "" for every tenant's effects. */
  tenant_id: string;
  paused_by: string;
  reason: string;
  paused_at: string;
}

/** A step of a saga definition. */
export interface SagaStepDefinition {
  name: string;
  connector: string;
  undo: "connector" | "none" | { connector: string };
}

/** A saga definition (`POST /v1/saga-definitions`). */
export interface SagaDefinition {
  name: string;
  steps: SagaStepDefinition[];
  compensation_attempts?: number;
  created_at?: string;
}

/** The body of `POST /v1/sagas`. */
export interface SagaStartRequest {
  definition: string;
  input?: JsonObject | null;
  start_key?: string;
}

/** A saga's state. */
export type SagaState = "RUNNING" | "COMPLETED" | "COMPENSATING" | "COMPENSATED" | "STUCK";

/** A saga, its steps and its history. */
export interface Saga {
  id: string;
  tenant_id: string;
  definition: string;
  start_key?: string;
  input: JsonObject;
  state: SagaState;
  current_step: number;
  step_count: number;
  error?: string;
  stuck_reason?: string;
  steps?: Array<{
    index: number;
    name: string;
    state: string;
    effect_id?: string;
    result?: Json;
    error?: string;
    compensation_effect_id?: string;
    compensation_attempts?: number;
    compensation_result?: Json;
  }>;
  history?: Array<{ to: SagaState; from?: SagaState; step?: number; actor: string; reason?: string; at: string }>;
  created_at: string;
  updated_at: string;
  deduplicated?: boolean;
}

/** Query of `GET /v1/sagas`. */
export interface ListSagasQuery {
  state?: SagaState;
  definition?: string;
  limit?: number;
  cursor?: string;
}

/** The body of `POST /v1/sagas/{id}/resolve`. */
export interface SagaResolveRequest {
  action: "retry_compensation" | "mark_compensated";
  reason: string;
  actor?: string;
}

/** The body of `POST /v1/sessions/{key}/messages`. */
export interface MessageRequest {
  message_id: string;
  content?: Json;
  at?: string;
}

/** A turn of a session. */
export interface Turn {
  id: string;
  session_key: string;
  seq: number;
  turn_group: string;
  status: "ACCUMULATING" | "PROCESSING" | "COMMITTING" | "COMPLETE" | "SUPERSEDED" | "FAILED";
  status_reason?: string;
  superseded_by?: string;
  attempt: number;
  window_ms?: number;
  message_ids?: string[];
  messages?: Array<{ id: string; message_id: string; content: Json; at?: string; received_at: string; turn_id?: string }>;
  decisions?: Array<{ action: string; reason?: string; decider?: string; message_ids?: string[] }>;
  [field: string]: unknown;
}

/** The answer of `POST /v1/sessions/{key}/messages`. */
export interface MessageAccepted {
  message: { id: string; message_id: string; content: Json; at?: string; received_at: string; turn_id: string };
  turn: Turn;
  deduplicated: boolean;
}

/** The body of `PUT /v1/turn-handlers/{tenant}`. */
export interface TurnHandlerRequest {
  url: string;
  timeout_ms?: number;
}

/** A tenant's turn handler. */
export interface TurnHandler {
  tenant: string;
  url: string;
  timeout_ms: number;
  created_at: string;
  updated_at: string;
}

/** The body of `PUT /v1/schedules/{tenant}/{name}`: exactly one of `cron` and `interval_seconds`. */
export interface ScheduleRequest {
  connector: string;
  args?: Json;
  /** A 5-field cron expression or a descriptor (`@hourly` …), UTC unless prefixed `CRON_TZ=<zone>`. */
  cron?: string;
  /** Ticks at each multiple of this many seconds since the Unix epoch (1 s or more). */
  interval_seconds?: number;
  /** `skip` (default): the latest missed tick only; `catch_up`: each, bounded. */
  missed?: "skip" | "catch_up";
  enabled?: boolean;
}

/** A tenant's schedule: one effect per tick, idempotency key `schedule/{name}/{tick}`. */
export interface Schedule {
  tenant: string;
  name: string;
  connector: string;
  args: Json;
  cron?: string;
  interval_seconds?: number;
  missed: "skip" | "catch_up";
  enabled: boolean;
  next_tick: string;
  last_tick?: string;
  last_effect_id?: string;
  last_error?: string;
  created_at: string;
  created_by: string;
  updated_at: string;
  updated_by: string;
}

/** The body of `POST /v1/event-subscriptions`. */
export interface SubscriptionRequest {
  url: string;
  patterns?: string[];
  tenant?: string;
  secret?: string;
}

/** A webhook subscription. `secret` is only in the answer of its creation. */
export interface Subscription {
  id: string;
  tenant?: string;
  url: string;
  patterns: string[];
  position?: string;
  delivery_effect_id?: string;
  state: "active" | "paused";
  paused_reason?: string;
  secret?: string;
  created_by?: string;
  created_at: string;
  updated_at: string;
}

/** The body of `POST /v1/event-subscriptions/{id}/pause`. */
export interface PauseRequest {
  reason?: string;
}

/** An event of the log (docs/events.md). */
export interface ReckonEvent {
  /** The position, `xid-seq`: resume after it with `Last-Event-ID`. */
  id: string;
  type: string;
  tenant?: string;
  session_key?: string;
  turn_id?: string;
  effect_id?: string;
  saga_id?: string;
  run_id?: string;
  payload?: Json;
  at: string;
}
