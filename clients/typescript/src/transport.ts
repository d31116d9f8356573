/** The HTTP layer of {@link ReckonClient}: timeouts, retries, `Idempotency-Key`, typed errors. */
import { randomUUID } from "node:crypto";
import {
  ConnectionError, InvalidResponseError, TimeoutError, errorClassForStatus, type ReckonError,
} from "./errors.js";
import { routes, type OperationId, type Route } from "./routes.js";

/** What the client is about to send; passed to {@link TransportOptions.onRequest}. */
export interface OutgoingRequest {
  operationId: OperationId;
  method: string;
  /** The path template of the route (`/v1/effects/{id}`). */
  route: string;
  url: string;
  headers: Record<string, string>;
  /** The body as sent (its exact bytes), or undefined. */
  body: string | undefined;
}

/** Options of the HTTP layer, shared by every request of a client. */
export interface TransportOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A tenant or system token (`rk_…`). Optional: signed callbacks and the OpenAPI documents need none. */
  token?: string | undefined;
  /** Each attempt's timeout, in milliseconds (default 30000). */
  timeoutMs?: number;
  /** Attempts after the first for 429, 503 and connection failures (default 3). */
  maxRetries?: number;
  /** The longest `Retry-After` honoured, in milliseconds (default 30000); a longer one is thrown at once. */
  maxRetryAfterMs?: number;
  /** The fetch to use (default the platform's). */
  fetch?: typeof fetch;
  /** Called before each attempt is sent, e.g. to log or record requests. */
  onRequest?: ((request: OutgoingRequest) => void) | undefined;
}

/** Per-call options of every client method. */
export interface RequestOptions {
  /** The `Idempotency-Key` header of a mutation; one is generated (and kept across retries) when absent. */
  idempotencyKey?: string;
  /** Aborts the call. */
  signal?: AbortSignal;
  /** This call's timeout per attempt, in milliseconds. */
  timeoutMs?: number;
  /** The `X-Request-Id` to send (1 to 128 printable ASCII characters). */
  requestId?: string;
}

/** One call of a route, as the client methods build it. */
export interface Call {
  params?: Record<string, string>;
  query?: Record<string, string | number | readonly string[] | undefined>;
  body?: unknown;
  headers?: Record<string, string | undefined>;
  /** Send no `Authorization` (a signed callback). */
  anonymous?: boolean;
  /** The exact body bytes to send (a signed callback signs them). */
  rawBody?: string;
}

/** A 2xx answer: its text, or with `stream` its unread body and a function that ends the headers' timeout. */
export interface SendResult {
  status: number;
  headers: Headers;
  text?: string;
  body?: ReadableStream<Uint8Array> | null;
  cancelTimeout?: () => void;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RETRIES = 3;
const DEFAULT_MAX_RETRY_AFTER_MS = 30_000;

/** Parses a `Retry-After` (seconds or an HTTP date) into milliseconds. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Sleeps for ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal?.reason); };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function backoff(attempt: number): number {
  const base = Math.min(200 * 2 ** attempt, 5_000);
  return base * (0.8 + Math.random() * 0.4);
}

/** Builds the URL of a route, checking and encoding its path parameters. */
export function buildUrl(baseUrl: string, route: Route, call: Call): string {
  const path = route.path.replace(/\{([a-z_]+)\}/g, (_m, name: string) => {
    const v = call.params?.[name];
    if (typeof v !== "string" || v === "") throw new TypeError(`${route.method} ${route.path}: path parameter "${name}" must be a non-empty string`);
    return encodeURIComponent(v);
  });
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(call.query ?? {})) {
    if (v === undefined) continue;
    if (!route.query.includes(k)) throw new TypeError(`${route.method} ${route.path}: unknown query parameter "${k}"`);
    if (Array.isArray(v)) for (const item of v) qs.append(k, String(item));
    else qs.append(k, String(v));
  }
  const q = qs.toString();
  return baseUrl.replace(/\/+$/, "") + path + (q ? `?${q}` : "");
}

/** The HTTP layer. One per client; holds no state but its options. */
export class Transport {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #maxRetries: number;
  readonly #maxRetryAfterMs: number;
  readonly #fetch: typeof fetch;
  readonly #onRequest: TransportOptions["onRequest"];

  constructor(opts: TransportOptions) {
    let url: URL;
    try { url = new URL(opts.baseUrl); } catch { throw new TypeError(`baseUrl ${JSON.stringify(opts.baseUrl)} is not a URL`); }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`baseUrl must be http(s), got ${url.protocol}`);
    for (const [name, v] of [["timeoutMs", opts.timeoutMs], ["maxRetries", opts.maxRetries], ["maxRetryAfterMs", opts.maxRetryAfterMs]] as const) {
      if (v !== undefined && !(Number.isFinite(v) && v >= 0)) throw new RangeError(`${name} must be a non-negative number, got ${v}`);
    }
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#maxRetries = opts.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.#maxRetryAfterMs = opts.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    this.#fetch = opts.fetch ?? globalThis.fetch;
    this.#onRequest = opts.onRequest;
  }

  /** Calls a route and decodes its JSON answer; throws a {@link ReckonError} for an error answer. */
  async json<T>(op: OperationId, call: Call, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(op, call, opts, { stream: false });
    const text = res.text ?? "";
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new InvalidResponseError(`${routes[op].method} ${routes[op].path}: the answer is not JSON`, {
        status: res.status, code: "invalid_response", requestId: res.headers.get("x-request-id") ?? undefined, cause,
      });
    }
  }

  /**
   * Sends a call, retrying 429 and 503 after their `Retry-After` (bounded) and connection failures
   * with backoff. A mutation carries one `Idempotency-Key` for all its attempts, so a retry is
   * replayed by the server rather than applied twice. With `stream`, a 2xx answer's body is left
   * unread for the caller (the timeout then covers the headers only).
   */
  async send(op: OperationId, call: Call, opts: RequestOptions, mode: { stream: boolean }): Promise<SendResult> {
    const route: Route = routes[op];
    const url = buildUrl(this.baseUrl, route, call);
    const headers: Record<string, string> = { Accept: mode.stream ? "text/event-stream" : "application/json" };
    // Without a token the request goes out anyway: the server answers 401 unauthenticated.
    if (!call.anonymous && this.#token) headers["Authorization"] = `Bearer ${this.#token}`;
    for (const [k, v] of Object.entries(call.headers ?? {})) {
      if (v === undefined) continue;
      if (!route.headers.includes(k)) throw new TypeError(`${route.method} ${route.path}: header ${k} is not part of this route`);
      headers[k] = v;
    }
    if (route.headers.includes("Idempotency-Key") && route.method !== "GET") {
      const key = opts.idempotencyKey ?? randomUUID();
      if (key === "" || key.length > 255) throw new RangeError("idempotencyKey must be 1 to 255 characters");
      headers["Idempotency-Key"] = key;
    }
    if (opts.requestId !== undefined) headers["X-Request-Id"] = opts.requestId;
    for (const [k, v] of Object.entries(headers)) {
      // Header values are bytes: refuse what fetch cannot send, naming the header, before anything is sent.
      if (/[\r\n\0]|[^\x00-\xff]/.test(v)) throw new TypeError(`${route.method} ${route.path}: header ${k === "Authorization" ? "Authorization (the token)" : k} holds a character an HTTP header cannot carry`);
    }
    let body: string | undefined;
    if (call.rawBody !== undefined) body = call.rawBody;
    else if (call.body !== undefined) {
      if (route.body === null) throw new TypeError(`${route.method} ${route.path} takes no body`);
      const fields = Object.keys(call.body as object);
      for (const f of fields) if (!route.body.includes(f)) throw new TypeError(`${route.method} ${route.path}: unknown body field "${f}"`);
      body = JSON.stringify(call.body);
    }
    if (body !== undefined) headers["Content-Type"] = "application/json";

    const timeoutMs = opts.timeoutMs ?? this.#timeoutMs;
    for (let attempt = 0; ; attempt++) {
      opts.signal?.throwIfAborted();
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      const signal = opts.signal ? AbortSignal.any([opts.signal, timeout.signal]) : timeout.signal;
      const done = () => clearTimeout(timer);
      this.#onRequest?.({ operationId: op, method: route.method, route: route.path, url, headers: { ...headers }, body });
      let res: Response;
      try {
        res = await this.#fetch(url, { method: route.method, headers, body, signal, redirect: "manual" });
      } catch (cause) {
        done();
        if (opts.signal?.aborted) throw opts.signal.reason;
        const timedOut = timeout.signal.aborted;
        // fetch rejects with "fetch failed" for network failures; anything else is a programming error.
        if (!timedOut && !(cause instanceof TypeError && cause.message === "fetch failed")) throw cause;
        const Err = timedOut ? TimeoutError : ConnectionError;
        const err = new Err(`${route.method} ${route.path}: ${timedOut ? `no answer within ${timeoutMs} ms` : `connection failed: ${describe(cause)}`}`,
          { status: 0, code: timedOut ? "timeout" : "connection_error", cause });
        if (attempt < this.#maxRetries) { await sleep(backoff(attempt), opts.signal); continue; }
        throw err;
      }
      const requestId = res.headers.get("x-request-id") ?? undefined;
      if (res.status >= 200 && res.status < 300) {
        if (mode.stream) return { status: res.status, headers: res.headers, body: res.body, cancelTimeout: done };
        try {
          const text = await res.text();
          return { status: res.status, headers: res.headers, text };
        } catch (cause) {
          if (opts.signal?.aborted) throw opts.signal.reason;
          const timedOut = timeout.signal.aborted;
          const Err = timedOut ? TimeoutError : ConnectionError;
          const err = new Err(`${route.method} ${route.path}: the answer was cut: ${describe(cause)}`,
            { status: res.status, code: timedOut ? "timeout" : "connection_error", requestId, cause });
          if (attempt < this.#maxRetries) { await sleep(backoff(attempt), opts.signal); continue; }
          throw err;
        } finally { done(); }
      }
      let text = "";
      try { text = await res.text(); } catch { /* the error is the status */ } finally { done(); }
      const err = decodeError(route, res.status, res.headers, text);
      if ((res.status === 429 || res.status === 503) && attempt < this.#maxRetries) {
        const wait = err.retryAfterMs ?? backoff(attempt);
        if (wait <= this.#maxRetryAfterMs) { await sleep(wait, opts.signal); continue; }
      }
      throw err;
    }
  }
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const c = (e as { cause?: unknown }).cause;
    return c instanceof Error ? `${e.message} (${c.message})` : e.message;
  }
  return String(e);
}

/** Decodes an error answer into the {@link ReckonError} subclass of its status. */
export function decodeError(route: Route, status: number, headers: Headers, text: string): ReckonError {
  let code = `http_${status}`;
  let message = `${route.method} ${route.path}: HTTP ${status}`;
  let requestId = headers.get("x-request-id") ?? undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; request_id?: unknown } };
    const e = parsed.error;
    if (e && typeof e.code === "string") code = e.code;
    if (e && typeof e.message === "string") message = e.message;
    if (e && typeof e.request_id === "string") requestId = e.request_id;
  } catch { /* not the documented shape: keep the status */ }
  const retryAfterMs = status === 429 || status === 503 ? parseRetryAfter(headers.get("retry-after")) : undefined;
  const Err = errorClassForStatus(status);
  return new Err(message, { status, code, requestId, retryAfterMs });
}

