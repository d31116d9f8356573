/**
 * The upstream side: serve Reckon's connector wire protocol and the HTTP turn handler
 * (docs/openapi/connector.json, docs/connectors.md "Wire protocol", docs/turns.md) from plain
 * functions, as a fetch-style handler (`(Request) => Promise<Response>`) or a `node:http` listener.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Json, JsonObject } from "./types.js";

// ---- outcomes a handler throws

/** A definite refusal: nothing was applied and never will be for this request. The effect becomes FAILED. */
export class Rejected extends Error {
  /** The 4xx status answered (default 422; never 408, 425 or 429, which mean something else). */
  readonly status: number;
  constructor(message: string, opts: { status?: number } = {}) {
    super(message);
    this.name = "Rejected";
    const status = opts.status ?? 422;
    if (!Number.isInteger(status) || status < 400 || status > 499 || [408, 425, 429].includes(status)) {
      throw new RangeError(`Rejected: status ${status} is not a refusal (400–499 except 408, 425, 429)`);
    }
    this.status = status;
  }
}

/** Nothing was applied; try again later — after `after` (seconds, or a date) if given, else with the connector's backoff. */
export class Retryable extends Error {
  /** The `Retry-After` to answer, in whole seconds (undefined: none). */
  readonly retryAfterSeconds: number | undefined;
  constructor(opts: { after?: number | Date; message?: string } = {}) {
    super(opts.message ?? "retry later");
    this.name = "Retryable";
    const after = opts.after;
    if (after === undefined) this.retryAfterSeconds = undefined;
    else if (after instanceof Date) this.retryAfterSeconds = Math.max(0, Math.ceil((after.getTime() - Date.now()) / 1000));
    else if (Number.isFinite(after) && after >= 0) this.retryAfterSeconds = Math.ceil(after);
    else throw new RangeError(`Retryable: after must be seconds ≥ 0 or a Date, got ${after}`);
  }
}

/** The upstream took the work and will call back (`POST /v1/callbacks/{correlation_id}`): the effect stays PENDING. */
export class Accepted extends Error {
  /** The id the callback will name; undefined: the one Reckon sent (`call.correlationId`). */
  readonly correlationId: string | undefined;
  constructor(correlationId?: string) {
    super("accepted");
    this.name = "Accepted";
    if (correlationId !== undefined && (typeof correlationId !== "string" || correlationId === "")) {
      throw new TypeError("Accepted: correlationId must be a non-empty string");
    }
    this.correlationId = correlationId;
  }
}

// ---- the connector protocol

/** One call of Reckon's reactor to a connector URL. */
export interface ConnectorCall {
  /** Which URL was called. */
  kind: "dispatch" | "status" | "compensate" | "cancel";
  /** The effect's id (for a compensation: the compensation's own). */
  effectId: string;
  /** The effect's idempotency key: a second call with the same key must not act twice. */
  idempotencyKey: string;
  /** How the upstream knows the effect; null when it has none. */
  businessKey: string | null;
  /** The effect's args. */
  args: JsonObject;
  /** The attempt number, from 1. */
  attempt: number;
  /** The id to call back with if the work is {@link Accepted}. */
  correlationId: string;
  /** The effect's callback secret (dispatch, compensate and cancel): sign the callback with it; never log it. */
  callbackSecret: string | undefined;
  /** Compensations only: the confirmed effect being undone. */
  original: { effectId: string; result: Json } | undefined;
  /** W3C trace context, when tracing is on. */
  traceparent: string | undefined;
  tracestate: string | undefined;
  /** Aborted when Reckon hangs up (its timeout passed). */
  signal: AbortSignal;
}

/** A status check's answer (connector.json `StatusAnswer`). */
export type StatusAnswer =
  | { status: "present"; result?: Json }
  | { status: "absent" }
  | { status: "duplicate"; count: number; result?: Json }
  | { status: "inconclusive" };

/** It happened: the effect is CONFIRMED with result. */
export const present = (result?: Json): StatusAnswer => (result === undefined ? { status: "present" } : { status: "present", result });
/** It did not happen: Reckon dispatches it again. */
export const absent = (): StatusAnswer => ({ status: "absent" });
/** It happened count (≥ 2) times: CONFIRMED with the first one's result, plus a compensation per extra. */
export const duplicate = (count: number, result?: Json): StatusAnswer => (result === undefined ? { status: "duplicate", count } : { status: "duplicate", count, result });
/** Cannot tell yet: Reckon asks again with backoff. */
export const inconclusive = (): StatusAnswer => ({ status: "inconclusive" });

/** The functions behind a connector. Only `dispatch` is required. */
export interface ConnectorHandlers {
  /** Perform the effect once per idempotency key; return its result (any JSON), or throw {@link Rejected}, {@link Retryable}, {@link Accepted}. Any other error: the outcome is UNKNOWN. */
  dispatch(call: ConnectorCall): Promise<Json | void> | Json | void;
  /** Say whether the effect of `call.idempotencyKey` happened. An error counts as inconclusive. */
  statusCheck?(call: ConnectorCall): Promise<StatusAnswer> | StatusAnswer;
  /** Undo `call.original`; idempotent on `call.idempotencyKey`. Outcomes as for dispatch. */
  compensate?(call: ConnectorCall): Promise<Json | void> | Json | void;
  /** Abandon the operation `call.correlationId`. Return normally only when it will certainly not take effect; `false` or {@link Rejected}: too late. */
  cancel?(call: ConnectorCall): Promise<boolean | void> | boolean | void;
}

/** Options of the connector and turn handlers. */
export interface HandlerOptions {
  /** The path prefix the handler is mounted at (default ""): it serves `{basePath}/dispatch`, `/status`, `/compensate`, `/cancel`. */
  basePath?: string;
  /** Called with errors of the handler's functions that become UNKNOWN or inconclusive answers (default: console.error). */
  onError?: (err: unknown, call: { kind: string; effectId?: string }) => void;
  /** The largest request body accepted, in bytes (default 8 MiB). */
  maxBodyBytes?: number;
}

/** A fetch-style handler. */
export type FetchHandler = (request: Request) => Promise<Response>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SECRET = /^[0-9a-f]{64}$/;

class BadRequest extends Error {}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

async function readJson(request: Request, maxBytes: number): Promise<unknown> {
  const ct = request.headers.get("content-type");
  if (ct !== null && !/^application\/json\b/i.test(ct)) throw new BadRequest(`Content-Type ${ct}: want application/json`);
  const len = Number(request.headers.get("content-length") ?? "0");
  if (len > maxBytes) throw new BadRequest(`body of ${len} bytes exceeds ${maxBytes}`);
  const text = await request.text();
  if (Buffer.byteLength(text) > maxBytes) throw new BadRequest(`body exceeds ${maxBytes} bytes`);
  try { return JSON.parse(text); } catch { throw new BadRequest("the body is not JSON"); }
}

function checkKeys(obj: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(obj)) if (!allowed.includes(k)) throw new BadRequest(`${where}: unknown field "${k}"`);
}

const REQUEST_FIELDS = ["effect_id", "idempotency_key", "business_key", "args", "attempt", "correlation_id", "original"] as const;

/** Checks a connector call against connector.json's `ConnectorRequest` and the headers that must agree with it. */
function parseConnectorCall(kind: ConnectorCall["kind"], request: Request, body: unknown, signal: AbortSignal): ConnectorCall {
  if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
  checkKeys(body, REQUEST_FIELDS, "body");
  const { effect_id, idempotency_key, business_key, args, attempt, correlation_id, original } = body;
  if (typeof effect_id !== "string" || !UUID.test(effect_id)) throw new BadRequest("effect_id must be a UUID");
  if (typeof idempotency_key !== "string" || idempotency_key === "") throw new BadRequest("idempotency_key must be a non-empty string");
  if (business_key !== null && typeof business_key !== "string") throw new BadRequest("business_key must be a string or null");
  if (!isObject(args)) throw new BadRequest("args must be an object");
  if (typeof attempt !== "number" || !Number.isInteger(attempt) || attempt < 1) throw new BadRequest("attempt must be an integer ≥ 1");
  if (typeof correlation_id !== "string") throw new BadRequest("correlation_id must be a string");
  let orig: ConnectorCall["original"];
  if (original !== undefined) {
    if (!isObject(original)) throw new BadRequest("original must be an object");
    checkKeys(original, ["effect_id", "result"], "original");
    if (typeof original.effect_id !== "string" || !UUID.test(original.effect_id)) throw new BadRequest("original.effect_id must be a UUID");
    if (!("result" in original)) throw new BadRequest("original.result is required");
    orig = { effectId: original.effect_id, result: original.result as Json };
  }
  if (kind === "compensate" && orig === undefined) throw new BadRequest("a compensation must carry original");
  const h = request.headers;
  if (h.get("idempotency-key") !== idempotency_key) throw new BadRequest("the Idempotency-Key header must equal idempotency_key");
  if (h.get("reckon-effect-id")?.toLowerCase() !== effect_id.toLowerCase()) throw new BadRequest("the Reckon-Effect-Id header must equal effect_id");
  if (h.get("reckon-attempt") !== String(attempt)) throw new BadRequest("the Reckon-Attempt header must equal attempt");
  const secret = h.get("reckon-callback-secret") ?? undefined;
  if (secret !== undefined && !SECRET.test(secret)) throw new BadRequest("Reckon-Callback-Secret must be 64 hex characters");
  if (kind === "status" && secret !== undefined) throw new BadRequest("a status check carries no Reckon-Callback-Secret");
  return {
    kind, effectId: effect_id, idempotencyKey: idempotency_key, businessKey: business_key as string | null,
    args: args as JsonObject, attempt, correlationId: correlation_id, callbackSecret: secret, original: orig,
    traceparent: h.get("traceparent") ?? undefined, tracestate: h.get("tracestate") ?? undefined, signal,
  };
}

function defaultOnError(err: unknown, call: { kind: string; effectId?: string }): void {
  console.error(`reckon ${call.kind}${call.effectId ? ` ${call.effectId}` : ""}:`, err);
}

/** Answers a dispatch or compensation's outcome per connector.json. */
function performAnswer(result: unknown): Response {
  const body = JSON.stringify(result === undefined ? null : result);
  if (body === undefined) throw new TypeError("the result is not JSON");
  return new Response(body, { status: 200, headers: { "content-type": "application/json" } });
}

function outcomeAnswer(err: unknown, call: ConnectorCall, onError: NonNullable<HandlerOptions["onError"]>): Response {
  if (err instanceof Rejected) return json(err.status, { error: err.message });
  if (err instanceof Retryable) {
    return json(429, { error: err.message }, err.retryAfterSeconds === undefined ? {} : { "retry-after": String(err.retryAfterSeconds) });
  }
  if (err instanceof Accepted) return json(202, err.correlationId === undefined ? {} : { correlation_id: err.correlationId });
  onError(err, call);
  return json(500, { error: "the outcome is unknown" }); // UNKNOWN: reconciled by the status check
}

function checkStatusAnswer(a: unknown): StatusAnswer {
  if (!isObject(a)) throw new TypeError("a status check must return a StatusAnswer object");
  switch (a.status) {
    case "present": case "absent": case "inconclusive": return a as StatusAnswer;
    case "duplicate":
      if (typeof a.count !== "number" || !Number.isInteger(a.count) || a.count < 2) throw new TypeError("duplicate: count must be an integer ≥ 2");
      return a as StatusAnswer;
    default: throw new TypeError(`unknown status ${JSON.stringify(a.status)}`);
  }
}

/**
 * A fetch-style handler serving a connector's URLs: `POST {basePath}/dispatch`, `/status`,
 * `/compensate` and `/cancel` (the ones whose function is given). It checks what Reckon sends
 * (`400` for a malformed call, which Reckon records as a refusal) and answers exactly as
 * docs/openapi/connector.json says: a result is `200`, {@link Rejected} its 4xx,
 * {@link Retryable} `429` with `Retry-After`, {@link Accepted} `202`, any other error `500`
 * (UNKNOWN, reconciled by the status check).
 */
export function connectorHandler(handlers: ConnectorHandlers, opts: HandlerOptions = {}): FetchHandler {
  if (typeof handlers?.dispatch !== "function") throw new TypeError("connectorHandler: dispatch is required");
  const base = (opts.basePath ?? "").replace(/\/+$/, "");
  const onError = opts.onError ?? defaultOnError;
  const maxBytes = opts.maxBodyBytes ?? 8 << 20;
  const kinds: Record<string, ConnectorCall["kind"]> = {
    [`${base}/dispatch`]: "dispatch", [`${base}/status`]: "status", [`${base}/compensate`]: "compensate", [`${base}/cancel`]: "cancel",
  };
  return async (request) => {
    const kind = kinds[new URL(request.url).pathname];
    const fn = kind === undefined ? undefined
      : kind === "dispatch" ? handlers.dispatch : kind === "status" ? handlers.statusCheck : kind === "compensate" ? handlers.compensate : handlers.cancel;
    if (kind === undefined || fn === undefined) return json(404, { error: "not found" });
    if (request.method !== "POST") return json(405, { error: "method not allowed" }, { allow: "POST" });
    let call: ConnectorCall;
    try {
      call = parseConnectorCall(kind, request, await readJson(request, maxBytes), request.signal);
    } catch (err) {
      if (err instanceof BadRequest) return json(400, { error: err.message });
      throw err;
    }
    switch (kind) {
      case "dispatch":
      case "compensate":
        try {
          const result = await (kind === "dispatch" ? handlers.dispatch(call) : handlers.compensate!(call));
          return performAnswer(result);
        } catch (err) { return outcomeAnswer(err, call, onError); }
      case "status":
        try {
          return json(200, checkStatusAnswer(await handlers.statusCheck!(call)));
        } catch (err) {
          onError(err, call);
          return json(500, { error: "inconclusive" });
        }
      case "cancel":
        try {
          const ok = await handlers.cancel!(call);
          return ok === false ? json(409, { error: "too late to cancel" }) : json(200, {});
        } catch (err) {
          if (err instanceof Rejected) return json(409, { error: err.message });
          onError(err, call);
          return json(500, { error: "not cancelled" });
        }
    }
  };
}

/** The URLs of a connector served by {@link connectorHandler} at `baseUrl` (+ its basePath), for a {@link ConnectorDefinition}. */
export function connectorUrls(baseUrl: string, handlers: ConnectorHandlers): { dispatch_url: string; status_url?: string; compensate_url?: string; cancel_url?: string } {
  const b = baseUrl.replace(/\/+$/, "");
  return {
    dispatch_url: `${b}/dispatch`,
    ...(handlers.statusCheck ? { status_url: `${b}/status` } : {}),
    ...(handlers.compensate ? { compensate_url: `${b}/compensate` } : {}),
    ...(handlers.cancel ? { cancel_url: `${b}/cancel` } : {}),
  };
}

// ---- the HTTP turn handler

/** A message of a turn. */
export interface TurnMessage { id: string; message_id: string; content: Json; received_at: string; sent_at?: string }
/** A stored artifact of the turn group. */
export interface StoredArtifact {
  name: string; data: Json; input_fingerprint: string; dependency_fingerprint?: string;
  policy?: "ALWAYS_SAFE" | "CONDITIONAL" | "NEVER"; turn_id: string; saved_at: string;
}
/** What Reckon POSTs to a turn handler (connector.json `TurnRequest`). */
export interface TurnRequest {
  session_key: string; tenant: string; channel: string; turn_id: string; turn_group: string;
  seq: number; attempt: number; messages: TurnMessage[]; artifacts: StoredArtifact[];
}
/** An effect a turn decides, at journal position (decision, call_index). */
export interface TurnEffect { connector: string; args?: JsonObject | null; decision: number; call_index: number; business_key?: string }
/** An artifact to save for the turn group. */
export interface TurnArtifact { name: string; data: Json; input_fingerprint: string; dependency_fingerprint?: string; policy?: "ALWAYS_SAFE" | "CONDITIONAL" | "NEVER" }
/** A turn handler's answer (connector.json `TurnAnswer`). */
export interface TurnAnswer { effects?: TurnEffect[]; artifacts?: TurnArtifact[]; reused?: string[] }
/** A turn handler: decide the turn's effects. Throw {@link Rejected} to fail the turn for good, {@link Retryable} to be asked again. */
export type TurnFunction = (turn: TurnRequest, ctx: { signal: AbortSignal }) => Promise<TurnAnswer | void> | TurnAnswer | void;

const TURN_FIELDS = ["session_key", "tenant", "channel", "turn_id", "turn_group", "seq", "attempt", "messages", "artifacts"];

function parseTurn(request: Request, body: unknown): TurnRequest {
  if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
  checkKeys(body, TURN_FIELDS, "body");
  for (const f of ["session_key", "tenant", "channel"]) if (typeof body[f] !== "string") throw new BadRequest(`${f} must be a string`);
  for (const f of ["turn_id", "turn_group"]) if (typeof body[f] !== "string" || !UUID.test(body[f] as string)) throw new BadRequest(`${f} must be a UUID`);
  if (!Number.isInteger(body.seq)) throw new BadRequest("seq must be an integer");
  if (!Number.isInteger(body.attempt) || (body.attempt as number) < 1) throw new BadRequest("attempt must be an integer ≥ 1");
  if (!Array.isArray(body.messages)) throw new BadRequest("messages must be an array");
  body.messages.forEach((m, i) => {
    if (!isObject(m)) throw new BadRequest(`messages[${i}] must be an object`);
    checkKeys(m, ["id", "message_id", "content", "received_at", "sent_at"], `messages[${i}]`);
    if (typeof m.id !== "string" || typeof m.message_id !== "string" || typeof m.received_at !== "string" || !("content" in m)) {
      throw new BadRequest(`messages[${i}]: id, message_id, content and received_at are required`);
    }
  });
  if (!Array.isArray(body.artifacts)) throw new BadRequest("artifacts must be an array");
  const h = request.headers;
  if (h.get("reckon-turn-id") !== body.turn_id) throw new BadRequest("the Reckon-Turn-Id header must equal turn_id");
  if (h.get("reckon-turn-group") !== body.turn_group) throw new BadRequest("the Reckon-Turn-Group header must equal turn_group");
  if (h.get("reckon-attempt") !== String(body.attempt)) throw new BadRequest("the Reckon-Attempt header must equal attempt");
  return body as unknown as TurnRequest;
}

/** Checks an answer against connector.json's `TurnAnswer`, so that a mistake fails here, named, rather than as a FAILED turn. */
export function checkTurnAnswer(a: unknown): TurnAnswer {
  if (a === undefined || a === null) return {};
  if (!isObject(a)) throw new TypeError("a turn answer must be an object");
  for (const k of Object.keys(a)) if (!["effects", "artifacts", "reused"].includes(k)) throw new TypeError(`turn answer: unknown field "${k}"`);
  const nat = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 0;
  if (a.effects !== undefined) {
    if (!Array.isArray(a.effects) || a.effects.length > 1000) throw new TypeError("effects: an array of at most 1000");
    a.effects.forEach((e, i) => {
      if (!isObject(e)) throw new TypeError(`effects[${i}] must be an object`);
      for (const k of Object.keys(e)) if (!["connector", "args", "decision", "call_index", "business_key"].includes(k)) throw new TypeError(`effects[${i}]: unknown field "${k}"`);
      if (typeof e.connector !== "string" || e.connector === "") throw new TypeError(`effects[${i}].connector is required`);
      if (e.args !== undefined && e.args !== null && !isObject(e.args)) throw new TypeError(`effects[${i}].args must be an object`);
      if (!nat(e.decision) || !nat(e.call_index)) throw new TypeError(`effects[${i}]: decision and call_index must be integers ≥ 0`);
      if (e.business_key !== undefined && typeof e.business_key !== "string") throw new TypeError(`effects[${i}].business_key must be a string`);
    });
  }
  if (a.artifacts !== undefined) {
    if (!Array.isArray(a.artifacts) || a.artifacts.length > 100) throw new TypeError("artifacts: an array of at most 100");
    a.artifacts.forEach((x, i) => {
      if (!isObject(x)) throw new TypeError(`artifacts[${i}] must be an object`);
      for (const k of Object.keys(x)) if (!["name", "data", "input_fingerprint", "dependency_fingerprint", "policy"].includes(k)) throw new TypeError(`artifacts[${i}]: unknown field "${k}"`);
      if (typeof x.name !== "string" || x.name.length < 1 || x.name.length > 200) throw new TypeError(`artifacts[${i}].name: 1 to 200 characters`);
      if (!("data" in x)) throw new TypeError(`artifacts[${i}].data is required`);
      if (typeof x.input_fingerprint !== "string" || x.input_fingerprint.length < 1 || x.input_fingerprint.length > 512) throw new TypeError(`artifacts[${i}].input_fingerprint: 1 to 512 characters`);
      if (x.policy !== undefined && !["ALWAYS_SAFE", "CONDITIONAL", "NEVER"].includes(x.policy as string)) throw new TypeError(`artifacts[${i}].policy: ALWAYS_SAFE, CONDITIONAL or NEVER`);
    });
  }
  if (a.reused !== undefined && (!Array.isArray(a.reused) || a.reused.length > 100 || !a.reused.every((r) => typeof r === "string"))) {
    throw new TypeError("reused: at most 100 names");
  }
  return a as TurnAnswer;
}

/**
 * A fetch-style HTTP turn handler (docs/turns.md): checks the turn Reckon POSTs, calls fn, and
 * answers `200` with its effects. {@link Rejected} fails the turn for good (its 4xx),
 * {@link Retryable} is `429` (attempted again), any other error `500` (attempted again). An answer
 * that breaks the document is not sent: it is reported to onError and answered `500`.
 */
export function turnHandler(fn: TurnFunction, opts: Omit<HandlerOptions, "basePath"> & { path?: string } = {}): FetchHandler {
  const onError = opts.onError ?? defaultOnError;
  const maxBytes = opts.maxBodyBytes ?? 8 << 20;
  return async (request) => {
    if (opts.path !== undefined && new URL(request.url).pathname !== opts.path) return json(404, { error: "not found" });
    if (request.method !== "POST") return json(405, { error: "method not allowed" }, { allow: "POST" });
    let turn: TurnRequest;
    try {
      turn = parseTurn(request, await readJson(request, maxBytes));
    } catch (err) {
      if (err instanceof BadRequest) return json(400, { error: err.message });
      throw err;
    }
    try {
      const answer = checkTurnAnswer(await fn(turn, { signal: request.signal }));
      return json(200, answer);
    } catch (err) {
      if (err instanceof Rejected) return json(err.status, { error: err.message });
      if (err instanceof Retryable) return json(429, { error: err.message }, err.retryAfterSeconds === undefined ? {} : { "retry-after": String(err.retryAfterSeconds) });
      onError(err, { kind: "turn", effectId: turn.turn_id });
      return json(500, { error: "turn handler failed" });
    }
  };
}

// ---- node:http

/**
 * Adapts a fetch-style handler to a `node:http` request listener:
 * `http.createServer(toNodeListener(connectorHandler({...})))`. The request's signal aborts when
 * the client hangs up.
 */
export function toNodeListener(handler: FetchHandler, opts: { maxBodyBytes?: number } = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const maxBytes = opts.maxBodyBytes ?? 8 << 20;
  return (req, res) => {
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableFinished) abort.abort(); });
    void (async () => {
      try {
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const c of req) {
          size += (c as Buffer).length;
          if (size > maxBytes) {
            res.writeHead(413, { "content-type": "application/json", connection: "close" });
            res.end(JSON.stringify({ error: `body exceeds ${maxBytes} bytes` }));
            return;
          }
          chunks.push(c as Buffer);
        }
        const host = req.headers.host ?? "localhost";
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) {
          if (v === undefined) continue;
          if (Array.isArray(v)) for (const x of v) headers.append(k, x); else headers.set(k, v);
        }
        const method = req.method ?? "GET";
        const request = new Request(`http://${host}${req.url ?? "/"}`, {
          method, headers, signal: abort.signal,
          ...(method === "GET" || method === "HEAD" ? {} : { body: Buffer.concat(chunks) }),
        });
        const response = await handler(request);
        const body = Buffer.from(await response.arrayBuffer());
        const out: Record<string, string> = {};
        response.headers.forEach((v, k) => { out[k] = v; });
        res.writeHead(response.status, { ...out, "content-length": String(body.length) });
        res.end(body);
      } catch (err) {
        console.error("reckon: handler failed:", err);
        if (!res.headersSent) { res.writeHead(500, { "content-type": "application/json" }); res.end('{"error":"internal"}'); }
        else res.destroy();
      }
    })();
  };
}

/** {@link connectorHandler} as a `node:http` request listener. */
export function connectorNodeListener(handlers: ConnectorHandlers, opts?: HandlerOptions): (req: IncomingMessage, res: ServerResponse) => void {
  return toNodeListener(connectorHandler(handlers, opts), opts ?? {});
}

/** {@link turnHandler} as a `node:http` request listener. */
export function turnNodeListener(fn: TurnFunction, opts?: Omit<HandlerOptions, "basePath"> & { path?: string }): (req: IncomingMessage, res: ServerResponse) => void {
  return toNodeListener(turnHandler(fn, opts), opts ?? {});
}
