/** Every client call against a real server (and reactor): effects, pagination, idempotency, runs, connectors and limits, sagas, sessions, turn handlers, subscriptions, events with resume across a SIGKILL. */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { BadRequestError, ConflictError, ForbiddenError, NotFoundError, ReckonError, UnprocessableError, connectorHandler, toNodeListener, type ReckonClient, type ReckonEvent } from "@reckon/client";
import { Stack, recorded, unique } from "./harness.js";
import { checkRecorded } from "./conformance-check.js";

const stack = new Stack();
let client: ReckonClient;
let system: ReckonClient;
let connector: string;
let upstreamUrl: string;

before(async () => {
  await stack.start();
  client = stack.client();
  system = stack.client(stack.systemToken);
  upstreamUrl = await stack.serve(toNodeListener(connectorHandler({ dispatch: (c) => ({ echo: c.args }) })));
  connector = unique("ts.echo");
  await system.putConnector({ name: connector, tags: ["write", "idempotent"], dispatch_url: `${upstreamUrl}/dispatch`, backoff_initial_ms: 100, backoff_max_ms: 500 });
  await stack.reactorKnows(connector);
});
after(async () => { checkRecorded(); await stack.stop(); });
function test(name: string, fn: () => Promise<void>) {
  it(name, async () => { try { await fn(); } catch (e) { stack.dumpLogs(); throw e; } });
}

describe("effects", () => {
  test("enqueue, deduplicate, get, wait, history", async () => {
    const key = unique("inv");
    const e = await client.enqueue({ connector, idempotency_key: key, args: { n: 1 }, business_key: "b-1", run_id: "r-effects", max_attempts: 3 });
    assert.equal(e.deduplicated, false);
    assert.equal(e.state, "PENDING");
    const again = await client.enqueue({ connector, idempotency_key: key, args: { n: 1 }, business_key: "b-1", run_id: "r-effects", max_attempts: 3 });
    assert.equal(again.deduplicated, true);
    assert.equal(again.id, e.id);
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.deepEqual(done.result, { echo: { n: 1 } });
    const got = await client.getEffect(e.id);
    assert.equal(got.business_key, "b-1");
    const history = await client.effectHistory(e.id);
    assert.deepEqual([history[0]!.to, history.at(-1)!.to], ["PENDING", "CONFIRMED"]);
    const run = await client.waitForRun("r-effects");
    assert.equal(run.settled, true);
    assert.equal(run.effects.CONFIRMED, 1);
  });

  test("enqueue at a journal position derives the key", async () => {
    const group = randomUUID();
    const e = await client.enqueue({ connector, position: { turn_group: group, decision: 2, call_index: 1 }, args: {} });
    assert.equal(e.idempotency_key, `${group}/d-2/${connector}/1`);
  });

  test("a POST without a key gets one; the same key replays, another request with it is idempotency_key_reused", async () => {
    const before = recorded.length;
    await client.enqueue({ connector, idempotency_key: unique("k"), args: {} });
    const sent = recorded.slice(before).find((r) => r.operationId === "enqueueEffect");
    assert.match(sent?.headers["Idempotency-Key"] ?? "", /^[0-9a-f-]{36}$/);
    const hk = unique("hdr");
    const k = unique("k");
    const a = await client.enqueue({ connector, idempotency_key: k, args: { x: 1 } }, { idempotencyKey: hk });
    const b = await client.enqueue({ connector, idempotency_key: k, args: { x: 1 } }, { idempotencyKey: hk });
    assert.equal(b.id, a.id);
    assert.equal(b.deduplicated, false, "the replay is the first response, not a dedup");
    await assert.rejects(client.enqueue({ connector, idempotency_key: unique("k"), args: {} }, { idempotencyKey: hk }),
      (e: unknown) => e instanceof UnprocessableError && e.code === "idempotency_key_reused");
  });

  test("list with cursor pagination walks every effect once", async () => {
    const run = unique("r-page");
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add((await client.enqueue({ connector, idempotency_key: unique(`p${i}`), args: { i }, run_id: run })).id);
    const first = await client.listEffects({ run, limit: 2 });
    assert.equal(first.effects.length, 2);
    assert.ok(first.next_cursor);
    const seen: string[] = [];
    for await (const e of client.iterateEffects({ run, limit: 2 })) seen.push(e.id);
    assert.equal(seen.length, 5);
    assert.deepEqual(new Set(seen), ids);
    const byState = await client.listEffects({ connector, state: "PENDING", limit: 1000 });
    assert.ok(byState.effects.every((e) => e.state === "PENDING"));
  });

  test("confirm, decline, cancel and resolve", async () => {
    const held = await client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true, confirmation_ttl_ms: 600_000 });
    assert.equal(held.confirmation?.state, "AWAITING");
    const declined = await client.declineEffect(held.id, { reason: "not today", actor: "bob" });
    assert.equal(declined.state, "FAILED");
    assert.equal(declined.confirmation?.state, "DECLINED");
    const held2 = await client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true });
    const cancelled = await client.cancelEffect(held2.id, { reason: "changed my mind" });
    assert.equal(cancelled.state, "FAILED");
    const held3 = await client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true });
    const resolved = await client.resolveEffect(held3.id, { to: "FAILED", reason: "operator says no", actor: "carol" });
    assert.equal(resolved.state, "FAILED");
    const held4 = await client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true });
    const confirmed = await client.confirmEffect(held4.id, { reason: "ok" });
    assert.equal(confirmed.confirmation?.state, "CONFIRMED");
    assert.equal((await client.waitForEffect(held4.id)).state, "CONFIRMED");
    await assert.rejects(client.resolveEffect(held4.id, { to: "PENDING", reason: "again" }), (e: unknown) => e instanceof ConflictError && e.code === "not_stuck");
  });

  test("redrive: a FAILED effect is sent again; a declined one and a settled one are refused", async () => {
    const { Rejected } = await import("@reckon/client");
    const seen = new Set<string>();
    const url = await stack.serve(toNodeListener(connectorHandler({
      dispatch: (c) => { if (!seen.has(c.idempotencyKey)) { seen.add(c.idempotencyKey); throw new Rejected("outage"); } return { ok: true }; },
    })));
    const flaky = unique("ts.flaky");
    await system.putConnector({ name: flaky, tags: ["write", "idempotent"], dispatch_url: `${url}/dispatch` });
    await stack.reactorKnows(flaky);
    const e = await client.enqueue({ connector: flaky, idempotency_key: unique("rd"), args: {} });
    assert.equal((await client.waitForEffect(e.id)).state, "FAILED");
    const redriven = await client.redriveEffect(e.id, { reason: "outage over", actor: "alice" });
    assert.equal(redriven.state, "PENDING");
    assert.equal(redriven.attempts, 0);
    assert.equal((await client.waitForEffect(e.id)).state, "CONFIRMED");
    await assert.rejects(client.redriveEffect(e.id, { reason: "again" }), (x: unknown) => x instanceof ConflictError && x.code === "not_failed");
    const held = await client.enqueue({ connector, idempotency_key: unique("h"), args: {}, require_confirmation: true });
    await client.declineEffect(held.id, { reason: "no" });
    await assert.rejects(client.redriveEffect(held.id, { reason: "again" }), (x: unknown) => x instanceof ConflictError && x.code === "redrive_declined");
  });

  test("an ordering key holds the next effect until the one before it is settled", async () => {
    const key = unique("order");
    const first = await client.enqueue({ connector, idempotency_key: unique("o"), args: {}, ordering_key: key, require_confirmation: true });
    const second = await client.enqueue({ connector, idempotency_key: unique("o"), args: {}, ordering_key: key });
    assert.equal(first.ordering_key, key);
    assert.equal((await client.getEffect(second.id)).held_by, first.id);
    assert.equal((await client.getEffect(first.id)).held_by, undefined);
    await client.declineEffect(first.id, { reason: "not this one" });
    assert.equal((await client.waitForEffect(second.id)).state, "CONFIRMED");
  });

  test("dedup_by_business_key: a second effect of a held business key is the first's replay, or business_key_conflict", async () => {
    const name = unique("ts.dedup");
    const made = await system.putConnector({
      name, tags: ["write", "idempotent"], dispatch_url: "http://127.0.0.1:9/none", business_key_fields: ["order"],
      dedup_by_business_key: true, requires_confirmation: true, confirmation_prompt: "sure?",
    });
    assert.equal(made.dedup_by_business_key, true);
    const order = unique("order");
    const first = await client.enqueue({ connector: name, idempotency_key: unique("bk"), args: { order, amount: 1 } });
    const replay = await client.enqueue({ connector: name, idempotency_key: unique("bk"), args: { order, amount: 1 } });
    assert.equal(replay.id, first.id);
    assert.equal(replay.deduplicated, true);
    await assert.rejects(client.enqueue({ connector: name, idempotency_key: unique("bk"), args: { order, amount: 2 } }),
      (x: unknown) => x instanceof ConflictError && x.code === "business_key_conflict");
    await client.declineEffect(first.id, { reason: "cleaning up" });
    const fresh = await client.enqueue({ connector: name, idempotency_key: unique("bk"), args: { order, amount: 2 } });
    assert.notEqual(fresh.id, first.id);
    await client.declineEffect(fresh.id, { reason: "cleaning up" });
  });

  test("a callback with the tenant token settles an accepted effect; a different repeat is callback_conflict", async () => {
    const url = await stack.serve(toNodeListener(connectorHandler({ dispatch: async () => { const { Accepted } = await import("@reckon/client"); throw new Accepted("corr-" + randomUUID()); } })));
    const name = unique("ts.acc");
    await system.putConnector({ name, tags: ["write", "idempotent"], dispatch_url: `${url}/dispatch`, async_timeout_ms: 60_000 });
    await stack.reactorKnows(name);
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    const accepted = await client.waitForEffect(e.id, { until: (x) => (x.history ?? []).some((h) => /accept/i.test(h.reason ?? "") || /accept/i.test(JSON.stringify(h.detail ?? ""))) });
    const corr = (accepted.history ?? []).map((h) => JSON.stringify(h)).join(" ").match(/corr-[0-9a-f-]{36}/)?.[0];
    assert.ok(corr, `the correlation id is in the history: ${JSON.stringify(accepted.history)}`);
    const settled = await client.callback(corr, { result: { ok: 1 } });
    assert.equal(settled.state, "CONFIRMED");
    assert.equal((await client.callback(corr, { result: { ok: 1 } })).state, "CONFIRMED", "a repeat is success");
    await assert.rejects(client.callback(corr, { error: "boom" }), (x: unknown) => x instanceof ConflictError && x.code === "callback_conflict");
  });
});

describe("connectors, limits, sagas, sessions, turn handlers, subscriptions", () => {
  test("connectors: list, get, delete", async () => {
    const name = unique("ts.tmp");
    const put = await system.putConnector({ name, tags: ["read"], dispatch_url: "http://127.0.0.1:9/x", timeout_ms: 1000 });
    assert.equal(put.name, name);
    assert.ok((await client.listConnectors()).some((c) => c.name === name));
    assert.equal((await client.getConnector(name)).dispatch_url, "http://127.0.0.1:9/x");
    assert.deepEqual(await system.deleteConnector(name), { name, deleted: true });
  });

  test("limits: put, get, list, reset, delete", async () => {
    const put = await system.putLimit(connector, { rate: 20, max_in_flight: 5, reason: "INC-42" });
    assert.equal(put.per_ms, 1000);
    assert.equal((await client.getLimit(connector)).limit.rate, 20);
    assert.ok((await client.listLimits()).limits.some((l) => l.connector === connector));
    assert.equal((await system.resetLimit(connector)).connector, connector);
    assert.deepEqual(await system.deleteLimit(connector), { connector, cleared: true });
  });

  test("pauses: pause, list, resume", async () => {
    const paused = await system.pauseConnector(connector, { tenant_id: "acme", reason: "upstream maintenance", actor: "ann" });
    assert.equal(paused.created, true);
    assert.equal(paused.tenant_id, "acme");
    assert.equal(paused.reason, "upstream maintenance");
    assert.equal((await system.pauseConnector(connector, { tenant_id: "acme", reason: "again" })).created, false);
    assert.ok((await client.listPauses()).some((p) => p.connector === connector && p.tenant_id === "acme"));
    await assert.rejects(client.pauseConnector(connector, { reason: "a tenant's token" }), (x: unknown) => x instanceof ReckonError && x.status === 403);
    await assert.rejects(system.pauseConnector(unique("nowhere"), { reason: "no such connector" }), (x: unknown) => x instanceof ReckonError && x.status === 404);
    assert.equal((await system.resumeConnector(connector, { reason: "not paused for every tenant" })).resumed, false);
    assert.deepEqual(await system.resumeConnector(connector, { tenant_id: "acme", reason: "done" }), { connector, tenant_id: "acme", resumed: true });
    assert.ok(!(await system.listPauses()).some((p) => p.connector === connector));
  });

  test("saga definitions and sagas: define, list, get, start, list, get, resolve", async () => {
    const def = unique("saga");
    await system.putSagaDefinition({ name: def, steps: [{ name: "one", connector, undo: "none" }], compensation_attempts: 2 });
    assert.ok((await client.listSagaDefinitions()).some((d) => d.name === def));
    assert.equal((await client.getSagaDefinition(def)).steps.length, 1);
    const s = await client.startSaga({ definition: def, input: { a: 1 }, start_key: unique("sk") });
    const done = await client.waitForSaga(s.id);
    assert.equal(done.state, "COMPLETED");
    const all: string[] = [];
    for await (const x of client.iterateSagas({ definition: def, limit: 1 })) all.push(x.id);
    assert.deepEqual(all, [s.id]);
    assert.equal((await client.listSagas({ state: "COMPLETED" })).sagas.some((x) => x.id === s.id), true);
    await assert.rejects(client.resolveSaga(s.id, { action: "mark_compensated", reason: "n/a" }), (e: unknown) => e instanceof ConflictError && e.code === "not_stuck");
  });

  test("sessions: a message, deduplicated; turn handler get and delete", async () => {
    const key = `${stack.tenant}:bot:${unique("u")}:email`;
    const m = await client.postMessage(key, { message_id: "m-1", content: { text: "hi" }, at: "2026-11-22T03:00:00Z" });
    assert.equal(m.turn.session_key, key);
    assert.equal((await client.postMessage(key, { message_id: "m-1", content: { text: "hi" } })).deduplicated, true);
    const turns = await client.listTurns(key, { limit: 5 });
    assert.equal(turns.length, 1);
    const admin = stack.client(stack.adminToken);
    await admin.putTurnHandler(stack.tenant, { url: "http://127.0.0.1:9/turns", timeout_ms: 1000 });
    assert.equal((await client.getTurnHandler(stack.tenant)).url, "http://127.0.0.1:9/turns");
    assert.deepEqual(await system.deleteTurnHandler(stack.tenant), { deleted: stack.tenant });
  });

  test("event subscriptions: create, list, get, pause, resume, delete", async () => {
    const sub = await client.createSubscription({ url: "http://127.0.0.1:9/hook", patterns: ["turn.*"], secret: "s".repeat(32) });
    assert.equal(sub.state, "active");
    assert.ok((await client.listSubscriptions({ limit: 10 })).some((s) => s.id === sub.id));
    assert.equal((await client.getSubscription(sub.id)).url, "http://127.0.0.1:9/hook");
    assert.equal((await client.pauseSubscription(sub.id, { reason: "maintenance" })).state, "paused");
    assert.equal((await client.resumeSubscription(sub.id)).state, "active");
    assert.deepEqual(await client.deleteSubscription(sub.id), { deleted: sub.id });
  });

  test("schedules: put, replace, get, list, refusals, delete", async () => {
    const admin = stack.client(stack.adminToken);
    const name = unique("nightly");
    const made = await admin.putSchedule(stack.tenant, name, { connector, cron: "0 2 * * *", args: { kind: "settlement" } });
    assert.equal(made.missed, "skip");
    assert.equal(made.enabled, true);
    assert.match(made.next_tick, /T02:00:00Z$/);
    const replaced = await system.putSchedule(stack.tenant, name, { connector, interval_seconds: 3600, missed: "catch_up", enabled: false });
    assert.equal(replaced.interval_seconds, 3600);
    assert.equal(replaced.cron, undefined);
    assert.equal((await client.getSchedule(stack.tenant, name)).missed, "catch_up");
    assert.ok((await client.listSchedules()).schedules.some((s) => s.name === name));
    assert.ok((await system.listSchedules({ tenant: stack.tenant, limit: 500 })).schedules.some((s) => s.name === name));
    await assert.rejects(client.putSchedule(stack.tenant, name, { connector, cron: "@hourly" }), ForbiddenError);
    await assert.rejects(admin.putSchedule(stack.tenant, unique("bad"), { connector, cron: "61 * * * *" }),
      (e: unknown) => e instanceof BadRequestError && e.code === "invalid_request" && /cron/.test(e.message));
    assert.deepEqual(await admin.deleteSchedule(stack.tenant, name), { tenant: stack.tenant, name, deleted: true });
    await assert.rejects(client.getSchedule(stack.tenant, name), NotFoundError);
  });

  test("the OpenAPI documents", async () => {
    const anon = stack.client(null);
    assert.equal(((await anon.openapi()) as { openapi: string }).openapi.startsWith("3.1"), true);
    assert.ok(((await anon.connectorOpenapi()) as { webhooks: object }).webhooks);
  });
});

describe("events", () => {
  test("the stream resumes with Last-Event-ID across a server SIGKILL and restart, missing and repeating nothing", async () => {
    const run = unique("r-ev");
    const stream = client.events({ patterns: ["tool.authorized"], after: "0", maxReconnectDelayMs: 300 });
    const got: ReckonEvent[] = [];
    const want = async (n: number) => {
      while (got.filter((e) => e.run_id === run).length < n) {
        const r = await stream.next();
        if (r.done) throw new Error("the stream ended");
        got.push(r.value);
      }
    };
    for (let i = 0; i < 3; i++) await client.enqueue({ connector, idempotency_key: unique("ev"), args: {}, run_id: run });
    await want(3);
    await stack.killAndRestartServer();
    for (let i = 0; i < 3; i++) await client.enqueue({ connector, idempotency_key: unique("ev"), args: {}, run_id: run });
    await want(6);
    stream.close();
    const mine = got.filter((e) => e.run_id === run);
    assert.equal(mine.length, 6);
    const ids = got.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, "no event repeated");
    assert.ok(stream.reconnects >= 1, "the stream reconnected");
    assert.equal(stream.lastEventId, ids.at(-1));
  });

  test("concurrent waits share one event stream", async () => {
    const before = recorded.length;
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => client.enqueue({ connector, idempotency_key: unique(`c${i}`), args: { i } }).then((e) => e.id)));
    const done = await Promise.all(ids.map((id) => client.waitForEffect(id)));
    assert.ok(done.every((e) => e.state === "CONFIRMED"));
    const streams = recorded.slice(before).filter((r) => r.operationId === "streamEvents").length;
    assert.ok(streams <= 2, `${streams} event streams for 10 waits`);
  });

  test("waitForEffect still works while the stream is down (polling)", async () => {
    const e = await client.enqueue({ connector, idempotency_key: unique("w"), args: {} });
    assert.equal((await client.waitForEffect(e.id, { useEvents: false })).state, "CONFIRMED");
  });
});
