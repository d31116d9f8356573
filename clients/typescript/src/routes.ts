/**
 * The client's route table: every operation of docs/openapi/api.json that this client calls, with
 * the query parameters, headers and body fields it may send. {@link ReckonClient} sends nothing
 * that is not declared here, and the conformance test holds this table to the document both ways.
 */
import type {
  CancelRunRequest, ConnectorDefinition, ConnectorPauseRequest, CreateRunRequest, DecisionRequest, EnqueueRequest,
  LimitRequest, MessageRequest, PauseRequest, ResolveRequest, SagaDefinition, SagaResolveRequest,
  SagaStartRequest, ScheduleRequest, SubscriptionRequest, TurnHandlerRequest,
} from "./types.js";

/** An HTTP method the API uses. */
export type Method = "GET" | "POST" | "PUT" | "DELETE";

/** One operation of the API, as this client calls it. */
export interface Route {
  readonly method: Method;
  /** The path template, with `{name}` for path parameters, as in the document. */
  readonly path: string;
  /** The query parameters the client may send. */
  readonly query: readonly string[];
  /** Headers the client may send besides `Authorization`, `Content-Type`, `Accept` and `X-Request-Id`. */
  readonly headers: readonly string[];
  /** The body's fields, or `null` for a route that takes no body. `[]`: an empty object. */
  readonly body: readonly string[] | null;
  /** Whether the route needs a token (a signed callback does not). */
  readonly auth: "bearer" | "bearer-or-signature" | "none";
}

/** Every field of T, listed once: a compile error when a field of the type is missing from the list. */
function fields<T>() {
  return <const L extends readonly (keyof T & string)[]>(
    ...list: L & ([Exclude<keyof T & string, L[number]>] extends [never] ? unknown : ["missing field", Exclude<keyof T & string, L[number]>])
  ): readonly string[] => list;
}

const IDEM = ["Idempotency-Key"] as const;

function route(method: Method, path: string, opts: Partial<Omit<Route, "method" | "path">> = {}): Route {
  const mutation = method !== "GET";
  return {
    method,
    path,
    query: opts.query ?? [],
    headers: opts.headers ?? (mutation ? IDEM : []),
    body: opts.body === undefined ? null : opts.body,
    auth: opts.auth ?? "bearer",
  };
}

const decision = fields<DecisionRequest>()("reason", "actor");

/** The route table, by operation id (the document's `operationId`). */
export const routes = {
  getOpenAPI: route("GET", "/openapi.json", { auth: "none" }),
  getConnectorOpenAPI: route("GET", "/openapi/connector.json", { auth: "none" }),

  enqueueEffect: route("POST", "/v1/effects", {
    body: fields<EnqueueRequest>()(
      "connector", "args", "idempotency_key", "position", "business_key", "run_id", "turn_id",
      "turn_group", "max_attempts", "async_timeout_ms", "async_hard_timeout", "require_confirmation",
      "confirmation_ttl_ms", "ordering_key"),
  }),
  listEffects: route("GET", "/v1/effects", { query: ["state", "connector", "run", "limit", "cursor"] }),
  getEffect: route("GET", "/v1/effects/{id}"),
  resolveEffect: route("POST", "/v1/effects/{id}/resolve", { body: fields<ResolveRequest>()("to", "reason", "actor") }),
  cancelEffect: route("POST", "/v1/effects/{id}/cancel", { body: decision }),
  confirmEffect: route("POST", "/v1/effects/{id}/confirm", { body: decision }),
  declineEffect: route("POST", "/v1/effects/{id}/decline", { body: decision }),
  redriveEffect: route("POST", "/v1/effects/{id}/redrive", { body: decision }),

  callback: route("POST", "/v1/callbacks/{correlation_id}", {
    headers: ["Idempotency-Key", "Reckon-Effect-Id", "Reckon-Signature"],
    body: ["result", "error"],
    auth: "bearer-or-signature",
  }),

  getRun: route("GET", "/v1/runs/{id}"),
  startRun: route("POST", "/v1/runs", {
    body: fields<CreateRunRequest>()("id", "max_steps", "max_consecutive_failures"),
  }),
  cancelRun: route("POST", "/v1/runs/{id}/cancel", { body: fields<CancelRunRequest>()("reason", "actor") }),

  putConnector: route("POST", "/v1/connectors", {
    body: fields<ConnectorDefinition>()(
      "name", "tags", "dispatch_url", "status_url", "compensate_url", "cancel_url",
      "business_key_fields", "ordering_key_fields", "dedup_by_business_key", "timeout_ms", "max_attempts", "status_check_limit",
      "backoff_initial_ms", "backoff_max_ms", "unsafe", "async_timeout_ms", "hard_timeout",
      "requires_confirmation", "confirmation_prompt", "limit", "description", "args_schema", "tenants",
      "created_at", "updated_at"),
  }),
  listConnectors: route("GET", "/v1/connectors"),
  getConnector: route("GET", "/v1/connectors/{name}"),
  deleteConnector: route("DELETE", "/v1/connectors/{name}"),

  listLimits: route("GET", "/v1/limits"),
  getLimit: route("GET", "/v1/connectors/{name}/limit"),
  putLimit: route("PUT", "/v1/connectors/{name}/limit", {
    body: fields<LimitRequest>()(
      "rate", "per_ms", "burst", "max_in_flight", "per_tenant", "break_after", "break_for_ms", "reason"),
  }),
  deleteLimit: route("DELETE", "/v1/connectors/{name}/limit"),
  resetLimit: route("POST", "/v1/connectors/{name}/limit/reset", { body: [] }),
  listPauses: route("GET", "/v1/pauses"),
  pauseConnector: route("POST", "/v1/connectors/{name}/pause", { body: fields<ConnectorPauseRequest>()("tenant_id", "reason", "actor") }),
  resumeConnector: route("POST", "/v1/connectors/{name}/resume", { body: fields<ConnectorPauseRequest>()("tenant_id", "reason", "actor") }),

  putSagaDefinition: route("POST", "/v1/saga-definitions", {
    body: fields<SagaDefinition>()("name", "steps", "compensation_attempts", "created_at"),
  }),
  listSagaDefinitions: route("GET", "/v1/saga-definitions"),
  getSagaDefinition: route("GET", "/v1/saga-definitions/{name}"),
  startSaga: route("POST", "/v1/sagas", { body: fields<SagaStartRequest>()("definition", "input", "start_key") }),
  listSagas: route("GET", "/v1/sagas", { query: ["state", "definition", "limit", "cursor"] }),
  getSaga: route("GET", "/v1/sagas/{id}"),
  resolveSaga: route("POST", "/v1/sagas/{id}/resolve", {
    body: fields<SagaResolveRequest>()("action", "reason", "actor"),
  }),

  postMessage: route("POST", "/v1/sessions/{key}/messages", {
    body: fields<MessageRequest>()("message_id", "content", "at"),
  }),
  listTurns: route("GET", "/v1/sessions/{key}/turns", { query: ["limit"] }),
  putTurnHandler: route("PUT", "/v1/turn-handlers/{tenant}", { body: fields<TurnHandlerRequest>()("url", "timeout_ms") }),
  getTurnHandler: route("GET", "/v1/turn-handlers/{tenant}"),
  deleteTurnHandler: route("DELETE", "/v1/turn-handlers/{tenant}"),

  streamEvents: route("GET", "/v1/events", { query: ["pattern", "after", "tenant"], headers: ["Last-Event-ID"] }),
  createSubscription: route("POST", "/v1/event-subscriptions", {
    body: fields<SubscriptionRequest>()("url", "patterns", "tenant", "secret"),
  }),
  listSubscriptions: route("GET", "/v1/event-subscriptions", { query: ["limit"] }),
  getSubscription: route("GET", "/v1/event-subscriptions/{id}"),
  deleteSubscription: route("DELETE", "/v1/event-subscriptions/{id}"),
  pauseSubscription: route("POST", "/v1/event-subscriptions/{id}/pause", { body: fields<PauseRequest>()("reason") }),
  resumeSubscription: route("POST", "/v1/event-subscriptions/{id}/resume", { body: [] }),

  listSchedules: route("GET", "/v1/schedules", { query: ["tenant", "limit", "cursor"] }),
  getSchedule: route("GET", "/v1/schedules/{tenant}/{name}"),
  putSchedule: route("PUT", "/v1/schedules/{tenant}/{name}", {
    body: fields<ScheduleRequest>()("connector", "args", "cron", "interval_seconds", "missed", "enabled"),
  }),
  deleteSchedule: route("DELETE", "/v1/schedules/{tenant}/{name}"),
} as const satisfies Record<string, Route>;

/** An operation id of the route table. */
export type OperationId = keyof typeof routes;
