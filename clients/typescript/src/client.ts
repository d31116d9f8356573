/** {@link ReckonClient}: every route of Reckon's HTTP API (docs/api.md, docs/openapi/api.json). */
import { ReckonError } from "./errors.js";
import { EventStream, type EventStreamOptions } from "./events.js";
import { sign } from "./signature.js";
import { Transport, type RequestOptions, type TransportOptions } from "./transport.js";
import type {
  CancelRunRequest, Connector, ConnectorDefinition, ConnectorPause, ConnectorPauseRequest, CreateRunRequest, DecisionRequest, Effect,
  EffectList, EnqueueRequest, Json, LimitRequest, LimitState, ListEffectsQuery, ListSagasQuery,
  MessageAccepted, MessageRequest, OperatorLimit, PauseRequest, ResolveRequest, Run, RunCancellation,
  Saga, SagaDefinition, SagaResolveRequest, SagaStartRequest, Schedule, ScheduleRequest, Subscription,
  SubscriptionRequest, ReckonEvent, Transition, Turn, TurnHandler, TurnHandlerRequest,
} from "./types.js";

/** Options of a {@link ReckonClient}. */
export interface ReckonClientOptions extends TransportOptions {
  /** Where the console is served, for evidence links (default `baseUrl`). */
  consoleUrl?: string;
}

/** Options of the waits ({@link ReckonClient.waitForEffect}, `waitForRun`, `waitForSaga`). */
export interface WaitOptions {
  /** Give up after this long, in milliseconds (default 60000): a {@link WaitTimeoutError}. */
  timeoutMs?: number;
  /** Aborts the wait. */
  signal?: AbortSignal;
  /** The longest pause between two polls, in milliseconds (default 2000; 5000 while the event stream is up). */
  maxPollIntervalMs?: number;
  /** Wake on the event stream (default true); polling alone otherwise. */
  useEvents?: boolean;
}

/** A wait ran out of time; `last` is what was seen last. */
export class WaitTimeoutError<T = unknown> extends ReckonError {
  readonly last: T | undefined;
  constructor(message: string, last: T | undefined) {
    super(message, { status: 0, code: "wait_timeout" });
    this.last = last;
  }
}

/** The states in which an effect no longer moves by itself: CONFIRMED and FAILED (final), STUCK (until an operator resolves it). */
export const SETTLED_STATES: ReadonlySet<string> = new Set(["CONFIRMED", "FAILED", "STUCK"]);

/** Whether an effect is settled: CONFIRMED, FAILED or STUCK. */
export function isSettled(e: Pick<Effect, "state">): boolean { return SETTLED_STATES.has(e.state); }

/** Whether an effect is held for a person's confirmation. */
export function isAwaitingConfirmation(e: Pick<Effect, "state" | "confirmation">): boolean {
  return e.state === "PENDING" && e.confirmation?.state === "AWAITING";
}

/** Arguments of {@link ReckonClient.signedCallback}. */
export interface SignedCallback {
  /** The correlation id to call back (the dispatch's `Reckon-Correlation-Id`, or the one answered with the 202). */
  correlationId: string;
  /** The effect's id (the dispatch's `Reckon-Effect-Id`). */
  effectId: string;
  /** The effect's callback secret (the dispatch's `Reckon-Callback-Secret`). */
  secret: string;
  /** Unix seconds to sign with (default now). */
  timestamp?: number;
}

type Page<T> = { items: T[]; next_cursor?: string };

/**
 * A client of Reckon's HTTP API. Every method sends one documented request (retried on 429, 503
 * and connection failures, each attempt with a timeout), and throws a {@link ReckonError}
 * subclass for an error answer. Mutations carry an `Idempotency-Key` — yours, or a fresh one kept
 * across the retries of that call — so that a retry is replayed, never applied twice.
 *
 * ```ts
 * const reckon = new ReckonClient({ baseUrl: "http://127.0.0.1:8080", token: process.env.RECKON_TOKEN });
 * const effect = await reckon.enqueue({ connector: "bank.wire", idempotency_key: "invoice-42/wire", args: { amount: 1200 } });
 * const done = await reckon.waitForEffect(effect.id);
 * ```
 */
export class ReckonClient {
  readonly #t: Transport;
  /** The server's base URL, without a trailing slash. */
  readonly baseUrl: string;
  readonly #consoleUrl: string;
  readonly #hub: WaitHub;

  constructor(opts: ReckonClientOptions) {
    this.#t = new Transport(opts);
    this.baseUrl = this.#t.baseUrl;
    this.#consoleUrl = (opts.consoleUrl ?? this.baseUrl).replace(/\/+$/, "");
    this.#hub = new WaitHub((onConnect) => this.events({ patterns: WAIT_PATTERNS, maxReconnectDelayMs: 2_000, onConnect }));
  }

  /** The console page of an effect: its history and evidence (`/console/effects/{id}`). */
  consoleEffectUrl(effectId: string): string {
    return `${this.#consoleUrl}/console/effects/${encodeURIComponent(effectId)}`;
  }

  // ---- OpenAPI documents

  /** `GET /openapi.json`: the API's own document. */
  openapi(opts?: RequestOptions): Promise<Record<string, unknown>> {
    return this.#t.json("getOpenAPI", { anonymous: true }, opts);
  }

  /** `GET /openapi/connector.json`: the connector wire protocol's document. */
  connectorOpenapi(opts?: RequestOptions): Promise<Record<string, unknown>> {
    return this.#t.json("getConnectorOpenAPI", { anonymous: true }, opts);
  }

  // ---- Effects

  /** `POST /v1/effects`: enqueue an effect (new, or the existing one of its key with `deduplicated: true`). */
  async enqueue(req: EnqueueRequest, opts?: RequestOptions): Promise<Effect> {
    if (req.idempotency_key === undefined && req.position === undefined) {
      throw new TypeError("enqueue: idempotency_key or position is required");
    }
    return this.#t.json("enqueueEffect", { body: req }, opts);
  }

  /** `GET /v1/effects/{id}`: an effect with its history. */
  getEffect(id: string, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("getEffect", { params: { id } }, opts);
  }

  /** An effect's history: every transition, oldest first. */
  async effectHistory(id: string, opts?: RequestOptions): Promise<Transition[]> {
    return (await this.getEffect(id, opts)).history ?? [];
  }

  /** `GET /v1/effects`: one page, newest first; pass `next_cursor` back as `cursor`. */
  listEffects(query: ListEffectsQuery = {}, opts?: RequestOptions): Promise<EffectList> {
    return this.#t.json("listEffects", { query: { ...query } }, opts);
  }

  /** Every effect matching the filters, page after page (newest first). */
  async *iterateEffects(query: Omit<ListEffectsQuery, "cursor"> = {}, opts?: RequestOptions): AsyncGenerator<Effect> {
    yield* paginate((cursor) => this.listEffects({ ...query, ...(cursor ? { cursor } : {}) }, opts)
      .then((p) => ({ items: p.effects, ...(p.next_cursor ? { next_cursor: p.next_cursor } : {}) })));
  }

  /** `POST /v1/effects/{id}/resolve`: an operator's decision on a STUCK (or never attempted PENDING) effect. */
  resolveEffect(id: string, req: ResolveRequest, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("resolveEffect", { params: { id }, body: req }, opts);
  }

  /** `POST /v1/effects/{id}/cancel`: cancel a PENDING effect that was never attempted. */
  cancelEffect(id: string, req: DecisionRequest, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("cancelEffect", { params: { id }, body: req }, opts);
  }

  /** `POST /v1/effects/{id}/confirm`: let a held effect be dispatched. */
  confirmEffect(id: string, req: DecisionRequest, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("confirmEffect", { params: { id }, body: req }, opts);
  }

  /** `POST /v1/effects/{id}/decline`: a held effect becomes FAILED. */
  declineEffect(id: string, req: DecisionRequest, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("declineEffect", { params: { id }, body: req }, opts);
  }

  /**
   * `POST /v1/effects/{id}/redrive`: a FAILED effect becomes PENDING again, with the same
   * idempotency key and a fresh attempt budget. Refused (409) with `not_failed`,
   * `redrive_compensation`, `redrive_declined`, `redrive_owned`, `business_key_taken`, `run_cancelled`,
   * `run_halted`.
   */
  redriveEffect(id: string, req: DecisionRequest, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("redriveEffect", { params: { id }, body: req }, opts);
  }

  /**
   * Waits until an effect is settled (CONFIRMED, FAILED or STUCK), or `until` holds. Wakes on the
   * event stream's events of the effect and polls with backoff besides, so a broken stream only
   * slows it down.
   */
  waitForEffect(id: string, opts: WaitOptions & { until?: (e: Effect) => boolean } = {}): Promise<Effect> {
    const until = opts.until ?? isSettled;
    return this.#waitFor(`effect ${id}`, () => this.getEffect(id, withSignal(opts.signal)), until, opts,
      (ev) => ev.effect_id === id);
  }

  // ---- Callbacks

  /** `POST /v1/callbacks/{correlation_id}` with the client's tenant token: an async result, as an operator or relay. */
  async callback(correlationId: string, body: { result: Json } | { error: string }, opts?: RequestOptions): Promise<Effect> {
    return this.#t.json("callback", { params: { correlation_id: correlationId }, body: checkCallback(body) }, opts);
  }

  /**
   * `POST /v1/callbacks/{correlation_id}`, signed as the upstream with the effect's callback secret
   * (docs/async.md, "Signed callbacks"): no token needed. Each call is signed afresh.
   */
  async signedCallback(cb: SignedCallback, body: { result: Json } | { error: string }, opts?: RequestOptions): Promise<Effect> {
    const raw = JSON.stringify(checkCallback(body));
    return this.#t.json("callback", {
      params: { correlation_id: cb.correlationId },
      anonymous: true,
      rawBody: raw,
      headers: { "Reckon-Effect-Id": cb.effectId, "Reckon-Signature": sign(cb.secret, raw, cb.timestamp) },
    }, opts);
  }

  // ---- Runs

  /** `POST /v1/runs`: create a run with guardrails, or change an existing run's. */
  createRun(req: CreateRunRequest, opts?: RequestOptions): Promise<Run> {
    return this.#t.json("startRun", { body: req }, opts);
  }

  /** `GET /v1/runs/{id}`: a run's counts and its completion gate (`settled`). */
  getRun(id: string, opts?: RequestOptions): Promise<Run> {
    return this.#t.json("getRun", { params: { id } }, opts);
  }

  /** `POST /v1/runs/{id}/cancel`: cancel a run; its effects not yet attempted fail. */
  cancelRun(id: string, req: CancelRunRequest, opts?: RequestOptions): Promise<RunCancellation> {
    return this.#t.json("cancelRun", { params: { id }, body: req }, opts);
  }

  /** Waits for a run's completion gate: `settled` (none of its effects PENDING or UNKNOWN). */
  waitForRun(id: string, opts: WaitOptions = {}): Promise<Run> {
    return this.#waitFor(`run ${id}`, () => this.getRun(id, withSignal(opts.signal)), (r) => r.settled, opts,
      (ev) => ev.run_id === id);
  }

  // ---- Connectors and limits (system token for changes)

  /** `POST /v1/connectors`: create or replace an HTTP connector (system token). */
  putConnector(def: ConnectorDefinition, opts?: RequestOptions): Promise<Connector> {
    return this.#t.json("putConnector", { body: def }, opts);
  }

  /** `GET /v1/connectors`. */
  async listConnectors(opts?: RequestOptions): Promise<Connector[]> {
    return (await this.#t.json<{ connectors: Connector[] }>("listConnectors", {}, opts)).connectors;
  }

  /** `GET /v1/connectors/{name}`. */
  getConnector(name: string, opts?: RequestOptions): Promise<Connector> {
    return this.#t.json("getConnector", { params: { name } }, opts);
  }

  /** `DELETE /v1/connectors/{name}` (system token). */
  deleteConnector(name: string, opts?: RequestOptions): Promise<{ name: string; deleted: boolean }> {
    return this.#t.json("deleteConnector", { params: { name } }, opts);
  }

  /** `GET /v1/limits`: every operator's limit and the state of every limit key. */
  listLimits(opts?: RequestOptions): Promise<{ limits: OperatorLimit[]; states: LimitState[] }> {
    return this.#t.json("listLimits", {}, opts);
  }

  /** `GET /v1/connectors/{name}/limit`: the connector's operator's limit (404 when none). */
  getLimit(name: string, opts?: RequestOptions): Promise<{ limit: OperatorLimit; states: LimitState[] }> {
    return this.#t.json("getLimit", { params: { name } }, opts);
  }

  /** `PUT /v1/connectors/{name}/limit`: set the operator's limit (system token). */
  putLimit(name: string, limit: LimitRequest, opts?: RequestOptions): Promise<OperatorLimit> {
    return this.#t.json("putLimit", { params: { name }, body: limit }, opts);
  }

  /** `DELETE /v1/connectors/{name}/limit` (system token). */
  deleteLimit(name: string, opts?: RequestOptions): Promise<{ connector: string; cleared: boolean }> {
    return this.#t.json("deleteLimit", { params: { name } }, opts);
  }

  /** `POST /v1/connectors/{name}/limit/reset`: close circuits, end pauses (system token). */
  resetLimit(name: string, opts?: RequestOptions): Promise<{ connector: string; reset: boolean }> {
    return this.#t.json("resetLimit", { params: { name }, body: {} }, opts);
  }

  /** `GET /v1/pauses`: the operators' pauses the token sees (every tenant's and its own). */
  async listPauses(opts?: RequestOptions): Promise<ConnectorPause[]> {
    return (await this.#t.json<{ pauses: ConnectorPause[] }>("listPauses", {}, opts)).pauses;
  }

  /** `POST /v1/connectors/{name}/pause`: stop every reactor starting its calls (system token). */
  pauseConnector(name: string, pause: ConnectorPauseRequest, opts?: RequestOptions): Promise<ConnectorPause & { created: boolean }> {
    return this.#t.json("pauseConnector", { params: { name }, body: pause }, opts);
  }

  /** `POST /v1/connectors/{name}/resume`: end its pause (system token). */
  resumeConnector(name: string, resume: ConnectorPauseRequest, opts?: RequestOptions): Promise<{ connector: string; tenant_id: string; resumed: boolean }> {
    return this.#t.json("resumeConnector", { params: { name }, body: resume }, opts);
  }

  // ---- Sagas

  /** `POST /v1/saga-definitions` (system token). Definitions never change: a new version is a new name. */
  putSagaDefinition(def: SagaDefinition, opts?: RequestOptions): Promise<SagaDefinition> {
    return this.#t.json("putSagaDefinition", { body: def }, opts);
  }

  /** `GET /v1/saga-definitions`. */
  async listSagaDefinitions(opts?: RequestOptions): Promise<SagaDefinition[]> {
    return (await this.#t.json<{ definitions: SagaDefinition[] }>("listSagaDefinitions", {}, opts)).definitions;
  }

  /** `GET /v1/saga-definitions/{name}`. */
  getSagaDefinition(name: string, opts?: RequestOptions): Promise<SagaDefinition> {
    return this.#t.json("getSagaDefinition", { params: { name } }, opts);
  }

  /** `POST /v1/sagas`: start a saga of a stored definition (idempotent with `start_key`). */
  startSaga(req: SagaStartRequest, opts?: RequestOptions): Promise<Saga> {
    return this.#t.json("startSaga", { body: req }, opts);
  }

  /** `GET /v1/sagas/{id}`. */
  getSaga(id: string, opts?: RequestOptions): Promise<Saga> {
    return this.#t.json("getSaga", { params: { id } }, opts);
  }

  /** `GET /v1/sagas`: one page, newest first. */
  listSagas(query: ListSagasQuery = {}, opts?: RequestOptions): Promise<{ sagas: Saga[]; next_cursor?: string }> {
    return this.#t.json("listSagas", { query: { ...query } }, opts);
  }

  /** Every saga matching the filters, page after page. */
  async *iterateSagas(query: Omit<ListSagasQuery, "cursor"> = {}, opts?: RequestOptions): AsyncGenerator<Saga> {
    yield* paginate((cursor) => this.listSagas({ ...query, ...(cursor ? { cursor } : {}) }, opts)
      .then((p) => ({ items: p.sagas, ...(p.next_cursor ? { next_cursor: p.next_cursor } : {}) })));
  }

  /** `POST /v1/sagas/{id}/resolve`: an operator's decision on a STUCK compensation. */
  resolveSaga(id: string, req: SagaResolveRequest, opts?: RequestOptions): Promise<Saga> {
    return this.#t.json("resolveSaga", { params: { id }, body: req }, opts);
  }

  /** Waits until a saga is COMPLETED, COMPENSATED or STUCK (or `until` holds). */
  waitForSaga(id: string, opts: WaitOptions & { until?: (s: Saga) => boolean } = {}): Promise<Saga> {
    const until = opts.until ?? ((s: Saga) => s.state === "COMPLETED" || s.state === "COMPENSATED" || s.state === "STUCK");
    return this.#waitFor(`saga ${id}`, () => this.getSaga(id, withSignal(opts.signal)), until, opts,
      (ev) => ev.saga_id === id || ev.effect_id !== undefined);
  }

  // ---- Sessions, turns and turn handlers

  /** `POST /v1/sessions/{key}/messages`: an inbound message for turn aggregation. */
  postMessage(sessionKey: string, msg: MessageRequest, opts?: RequestOptions): Promise<MessageAccepted> {
    return this.#t.json("postMessage", { params: { key: sessionKey }, body: msg }, opts);
  }

  /** `GET /v1/sessions/{key}/turns`: the newest `limit` turns, oldest first. */
  async listTurns(sessionKey: string, query: { limit?: number } = {}, opts?: RequestOptions): Promise<Turn[]> {
    return (await this.#t.json<{ turns: Turn[] }>("listTurns", { params: { key: sessionKey }, query: { ...query } }, opts)).turns;
  }

  /** `PUT /v1/turn-handlers/{tenant}`: where the tenant's turns go (its admin token, or a system token). */
  putTurnHandler(tenant: string, req: TurnHandlerRequest, opts?: RequestOptions): Promise<TurnHandler> {
    return this.#t.json("putTurnHandler", { params: { tenant }, body: req }, opts);
  }

  /** `GET /v1/turn-handlers/{tenant}`. */
  getTurnHandler(tenant: string, opts?: RequestOptions): Promise<TurnHandler> {
    return this.#t.json("getTurnHandler", { params: { tenant } }, opts);
  }

  /** `DELETE /v1/turn-handlers/{tenant}`. */
  deleteTurnHandler(tenant: string, opts?: RequestOptions): Promise<{ deleted: string }> {
    return this.#t.json("deleteTurnHandler", { params: { tenant } }, opts);
  }

  // ---- Events and webhook subscriptions

  /** `GET /v1/events`: an async iterator over the event stream that resumes across disconnects. */
  events(opts: EventStreamOptions = {}): EventStream {
    return new EventStream(this.#t, opts);
  }

  /** `POST /v1/event-subscriptions`: push events to a URL. The answer is the only place its `secret` is shown. */
  createSubscription(req: SubscriptionRequest, opts?: RequestOptions): Promise<Subscription> {
    return this.#t.json("createSubscription", { body: req }, opts);
  }

  /** `GET /v1/event-subscriptions`, oldest first. */
  async listSubscriptions(query: { limit?: number } = {}, opts?: RequestOptions): Promise<Subscription[]> {
    return (await this.#t.json<{ subscriptions: Subscription[] }>("listSubscriptions", { query: { ...query } }, opts)).subscriptions;
  }

  /** `GET /v1/event-subscriptions/{id}`. */
  getSubscription(id: string, opts?: RequestOptions): Promise<Subscription> {
    return this.#t.json("getSubscription", { params: { id } }, opts);
  }

  /** `DELETE /v1/event-subscriptions/{id}`. */
  deleteSubscription(id: string, opts?: RequestOptions): Promise<{ deleted: string }> {
    return this.#t.json("deleteSubscription", { params: { id } }, opts);
  }

  /** `POST /v1/event-subscriptions/{id}/pause`. */
  pauseSubscription(id: string, req: PauseRequest = {}, opts?: RequestOptions): Promise<Subscription> {
    return this.#t.json("pauseSubscription", { params: { id }, body: req }, opts);
  }

  /** `POST /v1/event-subscriptions/{id}/resume`. */
  resumeSubscription(id: string, opts?: RequestOptions): Promise<Subscription> {
    return this.#t.json("resumeSubscription", { params: { id }, body: {} }, opts);
  }

  /** `GET /v1/schedules`: one page of schedules by tenant and name (a tenant token: its own). */
  listSchedules(query: { tenant?: string; limit?: number; cursor?: string } = {}, opts?: RequestOptions): Promise<{ schedules: Schedule[]; next_cursor?: string }> {
    return this.#t.json("listSchedules", { query: { ...query } }, opts);
  }

  /** `GET /v1/schedules/{tenant}/{name}`. */
  getSchedule(tenant: string, name: string, opts?: RequestOptions): Promise<Schedule> {
    return this.#t.json("getSchedule", { params: { tenant, name } }, opts);
  }

  /** `PUT /v1/schedules/{tenant}/{name}`: create or replace a schedule (its tenant's admin token, or a system token). */
  putSchedule(tenant: string, name: string, req: ScheduleRequest, opts?: RequestOptions): Promise<Schedule> {
    return this.#t.json("putSchedule", { params: { tenant, name }, body: req }, opts);
  }

  /** `DELETE /v1/schedules/{tenant}/{name}`: no tick of it is enqueued after. */
  deleteSchedule(tenant: string, name: string, opts?: RequestOptions): Promise<{ tenant: string; name: string; deleted: true }> {
    return this.#t.json("deleteSchedule", { params: { tenant, name } }, opts);
  }

  // ---- waiting

  /**
   * Polls get() until done, with backoff; the client's shared event stream wakes the wait early
   * when a relevant event arrives, so that polls are rare while the stream is up.
   */
  async #waitFor<T>(what: string, get: () => Promise<T>, done: (v: T) => boolean, opts: WaitOptions,
    relevant: (ev: ReckonEvent) => boolean): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? 60_000;
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${timeoutMs}`);
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(new WaitTimeoutError(`${what}: not done within ${timeoutMs} ms`, undefined)), timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    let wake: (() => void) | undefined;
    let woken = false;
    const unsubscribe = opts.useEvents === false ? () => {} : this.#hub.subscribe({
      match: relevant,
      wake: () => { woken = true; wake?.(); },
    });
    let last: T | undefined;
    const timedOut = (reason: unknown) => (reason instanceof WaitTimeoutError ? new WaitTimeoutError(reason.message, last) : reason);
    try {
      for (let i = 0; ; i++) {
        woken = false;
        try {
          last = await get();
        } catch (err) {
          throw signal.aborted ? timedOut(signal.reason) : err;
        }
        if (done(last)) return last;
        if (woken) continue; // an event arrived while we read: read again at once
        const cap = opts.maxPollIntervalMs ?? (this.#hub.up ? 5_000 : 2_000);
        const delay = Math.min(cap, 50 * 2 ** Math.min(i, 10));
        try {
          await new Promise<void>((resolve, reject) => {
            const onAbort = () => { clearTimeout(t); reject(signal.reason); };
            const t = setTimeout(() => { signal.removeEventListener("abort", onAbort); resolve(); }, delay);
            wake = () => { clearTimeout(t); signal.removeEventListener("abort", onAbort); resolve(); };
            if (signal.aborted) onAbort(); else signal.addEventListener("abort", onAbort, { once: true });
          });
        } catch (reason) {
          throw timedOut(reason);
        } finally { wake = undefined; }
      }
    } finally {
      clearTimeout(timer);
      unsubscribe();
    }
  }
}

const WAIT_PATTERNS = ["tool.*", "effect.*", "run.*", "saga.*"];

/**
 * One event stream per client, shared by every wait in progress: opened by the first, closed when
 * the last ends. A stream refused for good (a 4xx) is not reopened for a while; waits poll meanwhile.
 */
class WaitHub {
  readonly #open: (onConnect: () => void) => EventStream;
  readonly #subs = new Set<{ match: (ev: ReckonEvent) => boolean; wake: () => void }>();
  #stream: EventStream | undefined;
  #up = false;
  #refusedUntil = 0;

  constructor(open: (onConnect: () => void) => EventStream) { this.#open = open; }

  /** Whether the stream is connected (waits then poll less often). */
  get up(): boolean { return this.#up; }

  subscribe(sub: { match: (ev: ReckonEvent) => boolean; wake: () => void }): () => void {
    this.#subs.add(sub);
    if (!this.#stream && Date.now() >= this.#refusedUntil) this.#start();
    return () => {
      this.#subs.delete(sub);
      if (this.#subs.size === 0) { this.#stream?.close(); this.#stream = undefined; this.#up = false; }
    };
  }

  #start(): void {
    const stream = this.#open(() => { this.#up = true; for (const s of this.#subs) s.wake(); });
    this.#stream = stream;
    void (async () => {
      try {
        for await (const ev of stream) for (const s of this.#subs) if (s.match(ev)) s.wake();
      } catch {
        this.#refusedUntil = Date.now() + 30_000;
      }
      if (this.#stream === stream) { this.#stream = undefined; this.#up = false; }
    })();
  }
}

function withSignal(signal: AbortSignal | undefined): RequestOptions {
  return signal ? { signal } : {};
}

function checkCallback(body: { result: Json } | { error: string }): { result: Json } | { error: string } {
  const hasResult = body !== null && typeof body === "object" && "result" in body;
  const hasError = body !== null && typeof body === "object" && "error" in body;
  if (hasResult === hasError) throw new TypeError("a callback body has exactly one of result and error");
  if (hasError && (typeof (body as { error: unknown }).error !== "string" || (body as { error: string }).error === "")) {
    throw new TypeError("a callback's error must be a non-empty string");
  }
  return body;
}

async function* paginate<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T> {
  let cursor: string | undefined;
  do {
    const p = await page(cursor);
    yield* p.items;
    cursor = p.next_cursor;
  } while (cursor);
}

