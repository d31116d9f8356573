/** The connector helpers behind a REAL reactor: success, rejection, Retry-After, a dropped connection after performing, a compensation, an async acceptance with a signed callback, a turn handler. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  Accepted, AuthenticationError, Rejected, Retryable, connectorUrls, duplicate, turnNodeListener, type ConnectorCall, type ReckonClient,
} from "@reckon/client";
import { Stack, eventually, unique } from "./harness.js";
import { ledgerHandlers, serveConnector } from "./upstream-fixture.js";
import { checkRecorded } from "./conformance-check.js";

const stack = new Stack();
let client: ReckonClient;
let system: ReckonClient;

before(async () => { await stack.start(); client = stack.client(); system = stack.client(stack.systemToken); });
after(async () => { checkRecorded(); await stack.stop(); });

/** Runs a test body, printing the server's and reactor's logs when it fails. */
function test(name: string, fn: () => Promise<void>) {
  it(name, async () => { try { await fn(); } catch (e) { stack.dumpLogs(); throw e; } });
}

async function register(name: string, url: string, handlers: Parameters<typeof connectorUrls>[1], extra: object = {}) {
  await system.putConnector({
    name, tags: ["write", "external"], ...connectorUrls(url, handlers),
    timeout_ms: 5000, max_attempts: 5, backoff_initial_ms: 100, backoff_max_ms: 500, status_check_limit: 5, ...extra,
  });
  await stack.reactorKnows(name);
}

describe("connector helpers behind a real reactor", () => {
  test("success: the result becomes the CONFIRMED effect's result, with the call's details", async () => {
    const { ledger, handlers } = ledgerHandlers((c) => ({ paid: c.args.amount as number, key: c.idempotencyKey }));
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.pay");
    await register(name, url, handlers);
    const key = unique("order");
    const e = await client.enqueue({ connector: name, idempotency_key: key, args: { amount: 12 }, run_id: "run-ok" });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.deepEqual(done.result, { paid: 12, key });
    const call = ledger.calls[0]!;
    assert.equal(call.effectId, e.id);
    assert.equal(call.attempt, 1);
    assert.equal(call.kind, "dispatch");
    assert.match(call.callbackSecret ?? "", /^[0-9a-f]{64}$/);
    assert.equal(call.correlationId, `run-ok:${e.id}`);
    assert.equal(ledger.performed.get(key)?.count, 1);
  });

  test("rejection: Rejected makes the effect FAILED with its message, in one attempt", async () => {
    const { handlers } = ledgerHandlers(() => { throw new Rejected("card declined"); });
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.reject");
    await register(name, url, handlers);
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "FAILED");
    assert.match(done.error ?? "", /card declined/);
    assert.equal(done.attempts, 1);
  });

  test("Retryable({after}) is honoured: the next attempt comes after Retry-After and confirms", async () => {
    const times: number[] = [];
    let first = true;
    const { handlers } = ledgerHandlers(() => {
      times.push(Date.now());
      if (first) { first = false; throw new Retryable({ after: 1 }); }
      return { ok: true };
    });
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.busy");
    await register(name, url, handlers);
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.equal(times.length, 2);
    assert.ok(times[1]! - times[0]! >= 900, `the retry came ${times[1]! - times[0]!} ms after a Retry-After of 1 s`);
    assert.equal(done.attempts, 2);
  });

  test("a dropped connection after performing: UNKNOWN → status check → CONFIRMED, performed once", async () => {
    const { ledger, handlers } = ledgerHandlers((c) => ({ ticket: `T-${c.idempotencyKey}` }));
    const { url, dropNext } = await serveConnector(stack, handlers);
    const name = unique("ts.ticket");
    await register(name, url, handlers);
    dropNext("/dispatch");
    const key = unique("k");
    const e = await client.enqueue({ connector: name, idempotency_key: key, args: { title: "printer" } });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.deepEqual(done.result, { ticket: `T-${key}` });
    assert.equal(ledger.performed.get(key)?.count, 1);
    assert.equal(ledger.calls.filter((c) => c.kind === "dispatch").length, 1, "dispatched once");
    assert.ok(ledger.calls.some((c) => c.kind === "status"), "the status check was asked");
    assert.equal(ledger.calls.find((c) => c.kind === "status")?.callbackSecret, undefined);
    const history = await client.effectHistory(e.id);
    assert.ok(history.some((h) => h.to === "UNKNOWN"), `history passes through UNKNOWN: ${JSON.stringify(history.map((h) => h.to))}`);
    assert.equal(history.at(-1)?.to, "CONFIRMED");
  });

  test("a connection cut before performing: UNKNOWN → status check absent → dispatched again → CONFIRMED once", async () => {
    const { ledger, handlers } = ledgerHandlers(() => ({ done: true }));
    const { url, cutBeforeNext } = await serveConnector(stack, handlers);
    const name = unique("ts.cut");
    await register(name, url, handlers);
    cutBeforeNext("/dispatch");
    const key = unique("k");
    const e = await client.enqueue({ connector: name, idempotency_key: key, args: {} });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.equal(ledger.performed.get(key)?.count, 1);
    const kinds = ledger.calls.map((c) => c.kind);
    assert.ok(kinds.includes("status"), `the status check was asked: ${kinds.join(",")}`);
    assert.equal(kinds.filter((k) => k === "dispatch").length, 1, "the handler ran once (the cut call never reached it)");
    assert.equal(ledger.calls.find((c) => c.kind === "dispatch")?.attempt, 2);
  });

  test("a status check answering duplicate: CONFIRMED with the first result, and the extra one compensated", async () => {
    const compensations: ConnectorCall[] = [];
    const { handlers } = ledgerHandlers(() => ({ charge: "ch_1" }), {
      statusCheck: () => duplicate(2, { charge: "ch_1" }),
      compensate: (c) => { compensations.push(c); return { refunded: true }; },
    });
    const { url, dropNext } = await serveConnector(stack, handlers);
    const name = unique("ts.dup");
    await register(name, url, handlers);
    dropNext("/dispatch");
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    const done = await client.waitForEffect(e.id);
    assert.equal(done.state, "CONFIRMED");
    assert.deepEqual(done.result, { charge: "ch_1" });
    await eventually(() => compensations.length === 1, 20_000, "the extra charge compensated");
    assert.equal(compensations[0]!.original?.effectId, e.id);
  });

  test("a compensation: a failed saga step undoes the confirmed one through compensate, with original", async () => {
    const compensations: ConnectorCall[] = [];
    const debit = ledgerHandlers((c) => ({ debited: (c.args.input as { amount: number }).amount }), {
      compensate: (c) => { compensations.push(c); return { refunded: true }; },
    });
    const credit = ledgerHandlers(() => { throw new Rejected("account closed"); });
    const a = await serveConnector(stack, debit.handlers);
    const b = await serveConnector(stack, credit.handlers);
    const dn = unique("ts.debit"), cn = unique("ts.credit");
    await register(dn, a.url, debit.handlers);
    await register(cn, b.url, credit.handlers);
    const def = unique("transfer");
    await system.putSagaDefinition({ name: def, steps: [
      { name: "debit", connector: dn, undo: "connector" },
      { name: "credit", connector: cn, undo: "none" },
    ] });
    const saga = await client.startSaga({ definition: def, input: { amount: 70 }, start_key: unique("sk") });
    const done = await client.waitForSaga(saga.id);
    assert.equal(done.state, "COMPENSATED");
    assert.equal(compensations.length, 1);
    const c = compensations[0]!;
    assert.equal(c.kind, "compensate");
    assert.deepEqual(c.original?.result, { debited: 70 });
    assert.equal(c.original?.effectId, done.steps?.[0]?.effect_id);
  });

  test("Accepted: the effect awaits a signed callback; a forged one is refused, the real one confirms", async () => {
    let seen: ConnectorCall | undefined;
    const { handlers } = ledgerHandlers((c) => { seen = c; throw new Accepted(); });
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.async");
    await register(name, url, handlers, { async_timeout_ms: 60_000 });
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: {} });
    const call = await eventually(() => seen, 20_000, "the dispatch");
    await eventually(async () => (await client.getEffect(e.id)).history?.some((h) => /accept/i.test(`${h.reason ?? ""}`)) || undefined, 10_000, "the acceptance recorded").catch(() => undefined);
    const anon = stack.client(null);
    await assert.rejects(
      anon.signedCallback({ correlationId: call.correlationId, effectId: call.effectId, secret: "0".repeat(64) }, { result: { forged: true } }),
      (err: unknown) => err instanceof AuthenticationError && err.code === "invalid_signature" && err.status === 401 && typeof err.requestId === "string",
    );
    const settled = await anon.signedCallback({ correlationId: call.correlationId, effectId: call.effectId, secret: call.callbackSecret! }, { result: { pages: 12 } });
    assert.equal(settled.state, "CONFIRMED");
    assert.deepEqual(settled.result, { pages: 12 });
  });

  test("cancel: a hard timeout calls cancel, which abandons the operation: FAILED, cancelled upstream", async () => {
    const cancels: ConnectorCall[] = [];
    const { handlers } = ledgerHandlers(() => { throw new Accepted(); }, {
      cancel: (c) => { cancels.push(c); return true; },
    });
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.job");
    await register(name, url, handlers, { hard_timeout: true });
    const e = await client.enqueue({ connector: name, idempotency_key: unique("k"), args: { job: 1 }, async_timeout_ms: 500 });
    const done = await client.waitForEffect(e.id, { timeoutMs: 30_000 });
    assert.equal(done.state, "FAILED");
    assert.match(done.error ?? "", /cancel/i);
    assert.equal(cancels.length >= 1, true);
    assert.equal(cancels[0]!.kind, "cancel");
    assert.equal(cancels[0]!.effectId, e.id);
    assert.match(cancels[0]!.callbackSecret ?? "", /^[0-9a-f]{64}$/);
    assert.deepEqual(cancels[0]!.args, { job: 1 });
  });

  test("an HTTP turn handler: the turn's effects are committed at their journal positions", async () => {
    const { ledger, handlers } = ledgerHandlers((c) => ({ refunded: c.args.order as string }));
    const { url } = await serveConnector(stack, handlers);
    const name = unique("ts.refund");
    await register(name, url, handlers);
    const turns: string[] = [];
    const turnUrl = await stack.serve(turnNodeListener((turn) => {
      turns.push(turn.turn_id);
      const text = (turn.messages[0]?.content as { text?: string }).text ?? "";
      return { effects: [{ connector: name, args: { order: text.split(" ").at(-1)! }, decision: 0, call_index: 0 }] };
    }, { path: "/turns" }));
    const admin = stack.client(stack.adminToken);
    await admin.putTurnHandler(stack.tenant, { url: `${turnUrl}/turns`, timeout_ms: 5000 });
    const key = `${stack.tenant}:bot:${unique("u")}:sms`;
    const accepted = await client.postMessage(key, { message_id: "m-1", content: { text: "refund order 9" } });
    assert.equal(accepted.deduplicated, false);
    const turn = await eventually(async () => (await client.listTurns(key)).find((t) => t.status === "COMPLETE"), 30_000, "the turn COMPLETE");
    assert.equal(turns.length >= 1, true);
    const effects = await eventually(async () => {
      const list = await client.listEffects({ connector: name });
      return list.effects.length === 1 ? list.effects : undefined;
    }, 10_000, "the turn's effect");
    assert.equal(effects[0]!.idempotency_key, `${turn.turn_group}/d-0/${name}/0`);
    const done = await client.waitForEffect(effects[0]!.id);
    assert.deepEqual(done.result, { refunded: "9" });
    assert.equal(ledger.performed.size, 1);

    // Rejected fails the turn for good, with the handler's reason.
    const rejecting = await stack.serve(turnNodeListener(() => { throw new Rejected("no such order"); }));
    await admin.putTurnHandler(stack.tenant, { url: rejecting, timeout_ms: 5000 });
    const key2 = `${stack.tenant}:bot:${unique("u")}:sms`;
    await client.postMessage(key2, { message_id: "m-1", content: { text: "refund order 404" } });
    const failed = await eventually(async () => (await client.listTurns(key2)).find((t) => t.status === "FAILED"), 30_000, "the turn FAILED");
    assert.match(failed.status_reason ?? "", /422.*no such order/);
  });
});
