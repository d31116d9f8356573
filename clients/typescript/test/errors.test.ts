/** Every error code of docs/api.md that a client can provoke, as its typed error with code, status and request id. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import {
  AuthenticationError, BadRequestError, ConflictError, ForbiddenError, NotFoundError, PayloadTooLargeError, ReckonClient,
  ReckonError, UnavailableError, UnprocessableError, sign, type Effect,
} from "@reckon/client";
import { PG_URL, Stack, freePort, unique } from "./harness.js";
import { checkRecorded } from "./conformance-check.js";
import { spawn } from "node:child_process";

const run = promisify(execFile);
const stack = new Stack();
let client: ReckonClient;
let system: ReckonClient;
let connector: string;
before(async () => {
  // -four-eyes: a held effect refuses a confirmation by the token that enqueued it.
  await stack.start({ serverArgs: ["-four-eyes"] });
  client = stack.client();
  system = stack.client(stack.systemToken);
  connector = unique("ts.err");
  // Nobody serves it: its effects stay PENDING while the tests provoke errors around them.
  await system.putConnector({ name: connector, tags: ["write", "idempotent"], dispatch_url: "http://127.0.0.1:9/none", backoff_initial_ms: 60_000, backoff_max_ms: 60_000 });
});
after(async () => { checkRecorded(); await stack.stop(); });

/** Asserts that p rejects with the class, status and code, and a request id. */
async function fails(p: Promise<unknown>, cls: typeof ReckonError, status: number, code: string): Promise<ReckonError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof cls, `want ${cls.name} ${code}, got ${String(err)}`);
  assert.equal(err.status, status, err.message);
  assert.equal(err.code, code, err.message);
  assert.ok(err.requestId && err.requestId.length > 0, "the request id is carried");
  assert.ok(err.message.length > 0);
  return err;
}

const held = () => client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true });

describe("error codes", () => {
  it("400s", async () => {
    await fails(client.enqueue({ connector, idempotency_key: unique("k"), args: {}, max_attempts: 5000 }), BadRequestError, 400, "invalid_request");
    await fails(client.getEffect("not-a-uuid"), BadRequestError, 400, "invalid_parameter");
    await fails(client.listEffects({ state: "pending" as never }), BadRequestError, 400, "invalid_state");
    await fails(client.listEffects({ cursor: "garbage" }), BadRequestError, 400, "invalid_cursor");
    await fails(client.enqueue({ connector, idempotency_key: unique("k"), args: {} }, { idempotencyKey: "cl\u00e9" }), BadRequestError, 400, "invalid_idempotency_key");
    await fails(system.putConnector({ name: unique("ts.bad"), dispatch_url: "ftp://x" }), BadRequestError, 400, "invalid_connector");
    await fails(system.putSagaDefinition({ name: unique("bad"), steps: [{ name: "a", connector, undo: "none" }, { name: "a", connector, undo: "none" }] }), BadRequestError, 400, "invalid_saga_definition");
    await fails(client.postMessage("not-a-key", { message_id: "m" }), BadRequestError, 400, "invalid_session_key");
    await fails(stack.client(stack.adminToken).putTurnHandler(stack.tenant, { url: "ftp://x" }), BadRequestError, 400, "invalid_turn_handler");
  });

  it("401s, including signed callbacks", async () => {
    await fails(stack.client(null).getEffect(randomUUID()), AuthenticationError, 401, "unauthenticated");
    await fails(stack.client("rk_not_a_token").getEffect(randomUUID()), AuthenticationError, 401, "invalid_token");
    const e = await held();
    const anon = stack.client(null);
    await fails(anon.signedCallback({ correlationId: e.id, effectId: e.id, secret: "a".repeat(64) }, { result: 1 }), AuthenticationError, 401, "invalid_signature");
  });

  it("403s", async () => {
    await fails(client.putConnector({ name: unique("ts.x"), dispatch_url: "http://127.0.0.1:9/" }), ForbiddenError, 403, "forbidden");
    await fails(system.getEffect(randomUUID()), ForbiddenError, 403, "forbidden");
    await fails(client.postMessage("other:bot:u:sms", { message_id: "m" }), ForbiddenError, 403, "session_tenant_mismatch");
  });

  it("404s", async () => {
    await fails(client.getEffect(randomUUID()), NotFoundError, 404, "not_found");
    await fails(client.getRun(unique("nobody")), NotFoundError, 404, "not_found");
    await fails(client.getLimit(unique("ts.none")), NotFoundError, 404, "not_found");
    await fails(client.callback(unique("corr"), { result: null }), NotFoundError, 404, "not_found");
  });

  it("409s", async () => {
    const key = unique("k");
    await client.enqueue({ connector, idempotency_key: key, args: { a: 1 } });
    await fails(client.enqueue({ connector, idempotency_key: key, args: { a: 2 } }), ConflictError, 409, "idempotency_conflict");
    const h = await held();
    await fails(client.resolveEffect(h.id, { to: "CONFIRMED", reason: "x" }), ConflictError, 409, "not_stuck");
    const declined = await client.declineEffect(h.id, { reason: "no" });
    assert.equal(declined.state, "FAILED");
    await fails(client.cancelEffect(h.id, { reason: "x" }), ConflictError, 409, "not_cancellable");
    await fails(client.confirmEffect(h.id, { reason: "x" }), ConflictError, 409, "not_awaiting_confirmation");
    await held();
    await fails(system.deleteConnector(connector), ConflictError, 409, "connector_in_use");
    const h2 = await held();
    await fails(client.callback(h2.id, { result: 1 }), ConflictError, 409, "not_awaiting_callback");
    const def = unique("saga");
    await system.putSagaDefinition({ name: def, steps: [{ name: "a", connector, undo: "none" }] });
    await fails(system.putSagaDefinition({ name: def, steps: [{ name: "b", connector, undo: "none" }] }), ConflictError, 409, "saga_definition_exists");
    const h3 = await held();
    await fails(client.confirmEffect(h3.id, { reason: "my own" }), ConflictError, 409, "four_eyes");
    assert.equal((await stack.client(stack.adminToken).confirmEffect(h3.id, { reason: "a second pair of eyes" })).confirmation?.state, "CONFIRMED");
    const sk = unique("sk");
    await client.startSaga({ definition: def, input: { a: 1 }, start_key: sk });
    await fails(client.startSaga({ definition: def, input: { a: 2 }, start_key: sk }), ConflictError, 409, "start_key_conflict");
  });

  it("409 callback_replayed and effect_stuck on signed callbacks", async () => {
    // An upstream that accepts, to get a callback secret, and a STUCK effect from an inconclusive status check.
    const { connectorHandler, toNodeListener, Accepted, inconclusive } = await import("@reckon/client");
    let secret = "", corr = "", effectId = "";
    const url = await stack.serve(toNodeListener(connectorHandler({
      dispatch: (c) => { if (c.args.stuck || (c.args.input as { stuck?: boolean } | undefined)?.stuck) throw new Accepted(); secret = c.callbackSecret!; corr = c.correlationId; effectId = c.effectId; throw new Accepted(); },
      statusCheck: () => inconclusive(),
    }, { onError: () => {} })));
    const name = unique("ts.cb");
    await system.putConnector({ name, tags: ["write"], dispatch_url: `${url}/dispatch`, status_url: `${url}/status`, status_check_limit: 1, backoff_initial_ms: 100, backoff_max_ms: 200, async_timeout_ms: 60_000 });
    await stack.reactorKnows(name);
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    await client.waitForEffect(e.id, { until: () => secret !== "" });
    const body = JSON.stringify({ result: { ok: true } });
    const t = Math.floor(Date.now() / 1000);
    const sig = sign(secret, body, t);
    const post = () => fetch(`${stack.baseUrl}/v1/callbacks/${encodeURIComponent(corr)}`, {
      method: "POST", body, headers: { "content-type": "application/json", "reckon-effect-id": effectId, "reckon-signature": sig },
    });
    assert.equal((await post()).status, 200);
    const anon = stack.client(null);
    await fails(anon.signedCallback({ correlationId: corr, effectId, secret, timestamp: t }, { result: { ok: true } }), ConflictError, 409, "callback_replayed");
    await fails(anon.signedCallback({ correlationId: corr, effectId, secret, timestamp: t - 600 }, { result: { ok: true } }), AuthenticationError, 401, "signature_expired");
    // Accepted, its deadline passes (UNKNOWN), the status check is inconclusive: STUCK.
    const s = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: { stuck: true }, async_timeout_ms: 500 });
    const stuck: Effect = await client.waitForEffect(s.id, { timeoutMs: 30_000 });
    assert.equal(stuck.state, "STUCK");
    await fails(client.callback(s.id, { result: 1 }), ConflictError, 409, "effect_stuck");

    // A saga held by a STUCK step effect: resolve the effect, not the saga.
    const short = unique("ts.short");
    await system.putConnector({ name: short, tags: ["write"], dispatch_url: `${url}/dispatch`, status_url: `${url}/status`, status_check_limit: 1, backoff_initial_ms: 100, backoff_max_ms: 200, async_timeout_ms: 500 });
    await stack.reactorKnows(short);
    const def = unique("saga-stuck");
    await system.putSagaDefinition({ name: def, steps: [{ name: "only", connector: short, undo: "none" }] });
    const saga = await client.startSaga({ definition: def, input: { stuck: true } });
    const held = await client.waitForSaga(saga.id, { timeoutMs: 30_000, until: (x) => x.steps?.[0]?.state === "STUCK" || x.state === "STUCK" });
    await fails(client.resolveSaga(held.id, { action: "retry_compensation", reason: "try" }), ConflictError, 409, "resolve_effect");
  });

  it("413 and 422s", async () => {
    await fails(client.enqueue({ connector, idempotency_key: unique("k"), args: { blob: "x".repeat(2 << 20) } }), PayloadTooLargeError, 413, "body_too_large");
    await fails(client.enqueue({ connector: unique("ts.nope"), idempotency_key: unique("k"), args: {} }), UnprocessableError, 422, "unknown_connector");
    await fails(client.startSaga({ definition: unique("nope") }), UnprocessableError, 422, "unknown_saga_definition");
    const hk = unique("hk");
    await client.enqueue({ connector, idempotency_key: unique("k"), args: {} }, { idempotencyKey: hk });
    await fails(client.enqueue({ connector, idempotency_key: unique("k"), args: {} }, { idempotencyKey: hk }), UnprocessableError, 422, "idempotency_key_reused");
  });

  it("503 schema_not_current: Retry-After is honoured (bounded), then a typed error with retryAfterMs", async () => {
    const db = `reckon_ts_empty_${Date.now()}`;
    await run("psql", [PG_URL, "-q", "-c", `CREATE DATABASE "${db}"`]);
    const u = new URL(PG_URL); u.pathname = `/${db}`;
    const port = await freePort();
    const p = spawn(`${stack.bin}/server`, ["-addr", `127.0.0.1:${port}`], { env: { ...process.env, DATABASE_URL: u.toString() }, stdio: "ignore" });
    try {
      const base = `http://127.0.0.1:${port}`;
      for (let i = 0; i < 100; i++) { try { await fetch(`${base}/healthz`); break; } catch { await new Promise((r) => setTimeout(r, 100)); } }
      let once = 0;
      const impatient = new ReckonClient({ baseUrl: base, token: stack.token, maxRetryAfterMs: 0, onRequest: () => { once++; } });
      const err = await fails(impatient.getEffect(randomUUID()), UnavailableError, 503, "schema_not_current");
      assert.equal(once, 1, "a Retry-After beyond the bound is not waited for");
      const retryAfterMs = err.retryAfterMs;
      assert.ok(retryAfterMs !== undefined && retryAfterMs > 0, "retryAfterMs is carried");
      const times: number[] = [];
      const patient = new ReckonClient({ baseUrl: base, token: stack.token, maxRetries: 1, maxRetryAfterMs: retryAfterMs, onRequest: () => { times.push(Date.now()); } });
      await fails(patient.getEffect(randomUUID()), UnavailableError, 503, "schema_not_current");
      assert.equal(times.length, 2, "retried once");
      assert.ok(times[1]! - times[0]! >= retryAfterMs - 100, `the retry waited for Retry-After (${times[1]! - times[0]!} ms of ${retryAfterMs})`);
    } finally {
      p.kill("SIGKILL");
      await run("psql", [PG_URL, "-q", "-c", `DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`]).catch(() => {});
    }
  });

  it("client-side: bad input is a clear error before any request", async () => {
    assert.throws(() => new ReckonClient({ baseUrl: "not a url" }), TypeError);
    assert.throws(() => new ReckonClient({ baseUrl: "http://x", timeoutMs: -1 }), RangeError);
    await assert.rejects(client.enqueue({ connector } as never), TypeError);
    await assert.rejects(client.getEffect(""), TypeError);
    await assert.rejects(new ReckonClient({ baseUrl: stack.baseUrl, token: "rk_\nx" }).getEffect(randomUUID()), /Authorization \(the token\)/);
    await assert.rejects(client.callback("c", { result: 1, error: "x" } as never), TypeError);
    await assert.rejects(new ReckonClient({ baseUrl: "http://127.0.0.1:9", maxRetries: 0, timeoutMs: 2000 }).getEffect(randomUUID()),
      (e: unknown) => e instanceof ReckonError && e.code === "connection_error" && e.status === 0);
  });
});
