/** The HTTP layer against fake Reckon servers (real HTTP on 127.0.0.1) that misbehave on purpose: Retry-After, hangs, cut answers, SSE drops and silence. */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { after, describe, it } from "node:test";
import { RateLimitedError, ReckonClient, TimeoutError, UnavailableError, parseRetryAfter, type ReckonEvent } from "@reckon/client";

const servers: Array<ReturnType<typeof createServer>> = [];
after(() => { for (const s of servers) { s.closeAllConnections(); s.close(); } });

async function fake(handler: (req: IncomingMessage, res: ServerResponse, n: number) => void): Promise<string> {
  let n = 0;
  const s = createServer((req, res) => handler(req, res, n++));
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const a = s.address();
  return `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
}

const effect = { id: "01a20112-a44b-7ce4-a9fb-012336fee338", state: "PENDING" };
const ok = (res: ServerResponse, body: unknown = effect) => { res.writeHead(200, { "content-type": "application/json" }); res.end(JSON.stringify(body)); };
const err = (res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json", "x-request-id": "req-1", ...headers });
  res.end(JSON.stringify({ error: { code, message: code, request_id: "req-1" } }));
};

describe("transport", () => {
  it("503 with Retry-After is retried after it, with the same Idempotency-Key", async () => {
    const seen: Array<{ key: string | undefined; at: number }> = [];
    const url = await fake((req, res, n) => {
      seen.push({ key: req.headers["idempotency-key"] as string | undefined, at: Date.now() });
      if (n === 0) err(res, 503, "database_unavailable", { "retry-after": "1" }); else ok(res);
    });
    const c = new ReckonClient({ baseUrl: url, token: "rk_x" });
    await c.enqueue({ connector: "c", idempotency_key: "k", args: {} });
    assert.equal(seen.length, 2);
    assert.ok(seen[0]!.key && seen[0]!.key === seen[1]!.key, "one Idempotency-Key for both attempts");
    assert.ok(seen[1]!.at - seen[0]!.at >= 900, "waited for Retry-After");
  });

  it("a Retry-After beyond the bound is thrown at once, carrying retryAfterMs", async () => {
    let calls = 0;
    const url = await fake((_req, res) => { calls++; err(res, 429, "rate_limited", { "retry-after": "100" }); });
    const c = new ReckonClient({ baseUrl: url, token: "rk_x", maxRetryAfterMs: 30_000 });
    const e = await c.getEffect(effect.id).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof RateLimitedError);
    assert.equal(e.retryAfterMs, 100_000);
    assert.equal(e.requestId, "req-1");
    assert.equal(calls, 1);
  });

  it("a server that never answers is a TimeoutError after timeoutMs; a cut answer is retried", async () => {
    const hang = await fake(() => { /* never answers */ });
    const c = new ReckonClient({ baseUrl: hang, token: "rk_x", timeoutMs: 200, maxRetries: 1 });
    const e = await c.getEffect(effect.id).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof TimeoutError && e.code === "timeout", String(e));
    const keys: Array<string | undefined> = [];
    const cut = await fake((req, res, n) => {
      keys.push(req.headers["idempotency-key"] as string | undefined);
      if (n === 0) req.socket.destroy(); else ok(res);
    });
    const c2 = new ReckonClient({ baseUrl: cut, token: "rk_x" });
    await c2.cancelEffect(effect.id, { reason: "x" });
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
  });

  it("503s exhaust maxRetries and end in an UnavailableError", async () => {
    let calls = 0;
    const url = await fake((_req, res) => { calls++; err(res, 503, "unavailable", { "retry-after": "0" }); });
    const c = new ReckonClient({ baseUrl: url, token: "rk_x", maxRetries: 2 });
    await assert.rejects(c.getRun("r"), (e: unknown) => e instanceof UnavailableError && e.code === "unavailable");
    assert.equal(calls, 3);
  });

  it("parseRetryAfter reads seconds and HTTP dates", () => {
    assert.equal(parseRetryAfter("5"), 5000);
    assert.equal(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1)), 10_000);
    assert.equal(parseRetryAfter("soon"), undefined);
    assert.equal(parseRetryAfter(null), undefined);
  });

  it("the event stream resumes with Last-Event-ID after a drop and after silence", async () => {
    const lastIds: Array<string | undefined> = [];
    const ev = (id: string) => `id: ${id}\nevent: tool.executed\ndata: ${JSON.stringify({ id, type: "tool.executed", at: "2026-01-01T00:00:00Z" })}\n\n`;
    const url = await fake((req, res, n) => {
      lastIds.push(req.headers["last-event-id"] as string | undefined);
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (n === 0) { res.write(": hello\n\n" + ev("1-1") + ev("1-2")); res.end(); }                 // the stream ends
      else if (n === 1) { res.write(ev("1-3").replace(/\n/g, "\r\n")); /* then silence */ }          // CRLF lines, then nothing
      else { res.write(ev("1-4")); }
    });
    const c = new ReckonClient({ baseUrl: url, token: "rk_x" });
    const stream = c.events({ idleTimeoutMs: 300, maxReconnectDelayMs: 50 });
    const got: ReckonEvent[] = [];
    for await (const e of stream) { got.push(e); if (got.length === 4) break; }
    assert.deepEqual(got.map((e) => e.id), ["1-1", "1-2", "1-3", "1-4"]);
    assert.deepEqual(lastIds, [undefined, "1-2", "1-3"]);
    assert.equal(stream.lastEventId, "1-4");
  });
});
