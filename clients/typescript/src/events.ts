/** The event stream, `GET /v1/events`: Server-Sent Events with resume across disconnects. */
import { ReckonError } from "./errors.js";
import { sleep, type Transport } from "./transport.js";
import type { ReckonEvent } from "./types.js";

/** Options of {@link ReckonClient.events}. */
export interface EventStreamOptions {
  /** Types or categories to receive (`tool.*`, `effect.stuck`, `*`); none: every type. At most 32. */
  patterns?: readonly string[];
  /** Start after this event id (`0`: the oldest kept). Absent: from now. */
  after?: string;
  /** A system token: one tenant's events. */
  tenant?: string;
  /** Stops the stream; the iterator then ends without an error. */
  signal?: AbortSignal;
  /** Reconnects after this many consecutive failed attempts are given up (default: never). */
  maxReconnects?: number;
  /** The longest pause between reconnects, in milliseconds (default 5000). */
  maxReconnectDelayMs?: number;
  /** A connection that sends nothing for this long is dropped and resumed (default 45000; the server sends a keepalive every 15 s). */
  idleTimeoutMs?: number;
  /** Each connection attempt's timeout until the answer's headers, in milliseconds (default the client's). */
  connectTimeoutMs?: number;
  /** Called when a connection is (re)established; e.g. to start polling only once the stream listens. */
  onConnect?: () => void;
}

/**
 * An async iterator over the event log. It resumes after the last event received (with
 * `Last-Event-ID`) whenever the connection breaks — the server restarting included — so that no
 * event is missed or repeated. `for await (const e of stream)`; `break` or the signal ends it.
 */
export class EventStream implements AsyncIterableIterator<ReckonEvent> {
  /** The id of the last event received: resume from it with `after` in a later stream. */
  lastEventId: string | undefined;
  /** How many times the stream reconnected. */
  reconnects = 0;
  readonly #transport: Transport;
  readonly #opts: EventStreamOptions;
  readonly #abort = new AbortController();
  readonly #gen: AsyncGenerator<ReckonEvent>;

  constructor(transport: Transport, opts: EventStreamOptions = {}) {
    if (opts.patterns && opts.patterns.length > 32) throw new RangeError("at most 32 patterns");
    this.#transport = transport;
    this.#opts = opts;
    this.lastEventId = opts.after;
    if (opts.signal) {
      if (opts.signal.aborted) this.#abort.abort();
      else opts.signal.addEventListener("abort", () => this.#abort.abort(), { once: true });
    }
    this.#gen = this.#run();
  }

  [Symbol.asyncIterator](): this { return this; }
  next(): Promise<IteratorResult<ReckonEvent>> { return this.#gen.next(); }
  async return(): Promise<IteratorResult<ReckonEvent>> { this.#abort.abort(); return this.#gen.return(undefined); }

  /** Ends the stream and its connection. */
  close(): void {
    this.#abort.abort();
    void this.#gen.return(undefined).catch(() => {});
  }

  async *#run(): AsyncGenerator<ReckonEvent> {
    const signal = this.#abort.signal;
    let failures = 0;
    let retryMs: number | undefined;
    while (!signal.aborted) {
      const idle = new AbortController();
      const connSignal = AbortSignal.any([signal, idle.signal]);
      let connected = false;
      try {
        const res = await this.#transport.send("streamEvents", {
          query: { pattern: this.#opts.patterns, tenant: this.#opts.tenant, after: this.lastEventId === undefined ? undefined : this.lastEventId },
          headers: { "Last-Event-ID": this.lastEventId },
        }, { signal: connSignal, ...(this.#opts.connectTimeoutMs !== undefined ? { timeoutMs: this.#opts.connectTimeoutMs } : {}) }, { stream: true });
        res.cancelTimeout?.();
        if (!res.body) throw new Error("the event stream has no body");
        connected = true;
        failures = 0;
        this.#opts.onConnect?.();
        for await (const ev of parseSSE(res.body, this.#opts.idleTimeoutMs ?? 45_000, idle)) {
          if (ev.retry !== undefined) retryMs = ev.retry;
          if (ev.id !== undefined) this.lastEventId = ev.id;
          if (ev.data === undefined) continue;
          let parsed: ReckonEvent;
          try { parsed = JSON.parse(ev.data) as ReckonEvent; } catch { continue; }
          yield parsed;
        }
      } catch (err) {
        if (signal.aborted) return;
        // A definite refusal (a bad parameter, a token, an expired position) does not heal by retrying.
        if (err instanceof ReckonError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) throw err;
        if (!(err instanceof ReckonError) && !(err instanceof Error)) throw err;
      }
      if (signal.aborted) return;
      if (!connected) failures++;
      if (this.#opts.maxReconnects !== undefined && failures > this.#opts.maxReconnects) {
        throw new ReckonError(`the event stream failed ${failures} times in a row`, { status: 0, code: "connection_error" });
      }
      const max = this.#opts.maxReconnectDelayMs ?? 5_000;
      const delay = retryMs ?? Math.min(max, 100 * 2 ** Math.min(failures, 10));
      try { await sleep(delay * (0.8 + Math.random() * 0.4), signal); } catch { return; }
      this.reconnects++;
    }
  }
}

interface SSEMessage { id?: string; event?: string; data?: string; retry?: number }

/** Parses a Server-Sent Events body (the WHATWG rules), aborting it after idleMs without a byte. */
export async function* parseSSE(body: ReadableStream<Uint8Array>, idleMs: number, idle: AbortController): AsyncGenerator<SSEMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let msg: SSEMessage = {};
  let data: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  const arm = () => { clearTimeout(timer); timer = setTimeout(() => { idle.abort(); reader.cancel().catch(() => {}); }, idleMs); timer.unref(); };
  try {
    arm();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      arm();
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        if (buf[nl] === "\r" && nl === buf.length - 1) break; // a CR that may be half of CRLF
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) msg.data = data.join("\n");
          if (msg.data !== undefined || msg.retry !== undefined) yield msg;
          msg = {};
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "id" && !value.includes("\0")) msg.id = value;
        else if (field === "event") msg.event = value;
        else if (field === "retry" && /^\d+$/.test(value)) msg.retry = Number(value);
      }
    }
  } finally {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
  }
}
